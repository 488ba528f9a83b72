"""What ``serve``, ``debug-serve`` and ``generate`` check before anything is built or loaded
(issue 38, item 3): every flag's value before PATH is resolved, the listening port before
the model loads, a one-line chat-template error naming the option once, and ``debug-serve``
taking PATH as ``serve`` does."""

from __future__ import annotations

import socket

import pytest
from click.testing import CliRunner

from ignition.cli import main


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def one_line_error(result, *expected: str) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def served(monkeypatch):
    """Run the serving commands up to the load: (options, host, port, direct) per start."""
    import ignition.serving.forever

    seen = []

    def serve_forever(options, host, port, direct, **_):
        seen.append((options, host, port, direct))

    monkeypatch.setattr(ignition.serving.forever, "serve_forever", serve_forever)
    return seen


@pytest.fixture
def fake_bundle(tmp_path):
    path = tmp_path / "bundle"
    path.mkdir()
    (path / "manifest.json").write_text("{}")
    return path


@pytest.fixture
def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def fake_build(monkeypatch):
    """Checkpoint builds recorded (LoadOptions) and written as an empty bundle."""
    import ignition.cli.progress

    builds = []

    def build(recipe_name, options, *, weights, out_dir, **_):
        builds.append(options)
        out_dir.mkdir(parents=True)
        for name in ("manifest.json", "catalog.json"):
            (out_dir / name).write_text("{}")
        return type("Result", (), {"notes": []})()

    monkeypatch.setattr(ignition.cli.progress, "build_with_progress", build)
    return builds


# -- 3.9: flags are checked before the artifacts are resolved ------------------------------

BAD_ALPHAS = ["0", "-1", "nan", "inf"]


@pytest.mark.parametrize("alpha", BAD_ALPHAS)
@pytest.mark.parametrize("where", [["/no/such/bundle"], ["--artifacts", "/no/such/bundle"]])
def test_a_bad_alpha_is_named_whatever_the_path(served, where, alpha):
    result = run("serve", *where, "--mtp-adaptive-verification-alpha", alpha)
    one_line_error(result, "--mtp-adaptive-verification-alpha", "greater than zero")
    assert served == []


def test_a_bad_alpha_is_named_on_a_real_bundle_before_it_loads(served, fake_bundle):
    result = run("serve", str(fake_bundle), "--mtp-adaptive-verification-alpha", "0")
    one_line_error(result, "--mtp-adaptive-verification-alpha = 0.0")
    assert served == []


def test_a_good_alpha_reaches_the_policy(served, fake_bundle):
    assert run("serve", str(fake_bundle), "--mtp-adaptive-verification-alpha", "0.5").exit_code == 0
    assert served[0][0].policy.adaptive_verification_alpha == 0.5


BAD_FLAGS = [
    (["serve", "--max-num-seqs", "0"], "--max-num-seqs = 0"),
    (["serve", "--kv-pages", "0"], "--kv-pages = 0"),
    (["serve", "--max-waiting", "-1"], "--max-waiting = -1"),
    (["serve", "--scheduler-terminal-value", "nan"], "--scheduler-terminal-value = nan"),
    (["serve", "--snapshot-rows", "-3"], "--snapshot-rows = -3"),
    (["serve", "--max-context", "1"], "--max-context = 1"),
    (["serve", "--port", "0"], "--port = 0"),
    (["debug-serve", "--direct", "--port", "0"], "--port = 0"),
    (["debug-serve", "--direct", "--threads", "0"], "--threads = 0"),
    (["generate", "--prompt", "x", "--temperature", "-1"], "--temperature = -1.0"),
    (["generate", "--prompt", "x", "--temperature", "nan"], "--temperature = nan"),
    (["generate", "--prompt", "x", "--top-p", "0"], "--top-p = 0.0: must be in (0, 1]"),
    (["generate", "--prompt", "x", "--top-p", "1.5"], "--top-p = 1.5"),
    (["generate", "--prompt", "x", "--top-k", "-1"], "--top-k = -1"),
    (["generate", "--prompt", "x", "--max-tokens", "0"], "--max-tokens = 0"),
]


@pytest.mark.parametrize(("args", "expected"), BAD_FLAGS)
def test_numeric_flags_are_named_before_a_missing_bundle(served, args, expected):
    result = run(*args[:1], "--artifacts", "/no/such/bundle", *args[1:])
    one_line_error(result, expected)
    assert served == []


def test_a_missing_bundle_is_one_line_naming_it(served):
    one_line_error(run("serve", "--artifacts", "/no/such/bundle"), "/no/such/bundle")
    one_line_error(run("debug-serve", "--direct", "/no/such/bundle"), "/no/such/bundle")
    missing = run("generate", "--artifacts", "/no/such/bundle", "--prompt", "x")
    one_line_error(missing, "/no/such/bundle: no such folder")


def test_generate_names_a_checkpoint_given_as_its_bundle(tmp_path):
    from tests.checkpoints import write_tiny_checkpoint

    checkpoint = write_tiny_checkpoint(tmp_path / "checkpoint")
    result = run("generate", "--artifacts", str(checkpoint), "--prompt", "x")
    one_line_error(result, "a checkpoint folder, not a bundle", "ignition build --weights")


# -- 3.4: the port is checked before the model loads ---------------------------------------


@pytest.mark.parametrize("command", [["serve"], ["debug-serve", "--direct"]])
def test_a_port_in_use_is_one_line_before_any_load(served, fake_bundle, command):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run(*command, str(fake_bundle), "--port", str(port))
    one_line_error(result, f"--port = {port}", "already in use")
    assert served == []


def test_a_port_in_use_is_found_before_a_checkpoint_is_built(served, fake_build, tmp_path):
    from tests.checkpoints import write_tiny_checkpoint

    checkpoint = write_tiny_checkpoint(tmp_path / "checkpoint")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run("serve", str(checkpoint), "--port", str(port), "--cache-dir", str(tmp_path))
    one_line_error(result, f"--port = {port}")
    assert fake_build == [] and served == []


def test_a_free_port_is_served(served, fake_bundle, free_port):
    assert run("serve", str(fake_bundle), "--port", str(free_port)).exit_code == 0
    assert served[0][2] == free_port


# -- 3.7: a chat-template syntax error names the option once -------------------------------


def test_an_inline_template_syntax_error_names_the_option_once(served, fake_bundle, free_port):
    result = run(
        "serve", str(fake_bundle), "--port", str(free_port), "--chat-template", "{% for m in %}"
    )
    line = one_line_error(result, "--chat-template (inline template): line 1: syntax error")
    assert line.count("--chat-template") == 1


def test_a_template_file_syntax_error_names_the_option_and_the_file(
    served, fake_bundle, tmp_path, free_port
):
    template = tmp_path / "chat.jinja"
    template.write_text("ok\n{% if %}")
    result = run(
        "serve", str(fake_bundle), "--port", str(free_port), "--chat-template", str(template)
    )
    line = one_line_error(result, f"--chat-template {template}: line 2: syntax error")
    assert line.count("--chat-template") == 1


# -- 3.11: debug-serve takes PATH as serve does --------------------------------------------


def test_debug_serve_takes_a_bundle_as_path(served, fake_bundle, free_port):
    for where in ([str(fake_bundle)], ["--artifacts", str(fake_bundle)]):
        result = run("debug-serve", "--direct", *where, "--port", str(free_port))
        assert result.exit_code == 0, result.output
    assert [(o.artifacts, direct) for o, _h, _p, direct in served] == [
        (str(fake_bundle), True)
    ] * 2


def test_debug_serve_builds_a_checkpoint_into_the_cache_as_serve_does(
    served, fake_build, tmp_path, free_port
):
    from tests.checkpoints import write_tiny_checkpoint

    checkpoint = write_tiny_checkpoint(tmp_path / "checkpoint")
    cache = ("--cache-dir", str(tmp_path / "cache"), "--port", str(free_port))
    first = run("serve", str(checkpoint), *cache)
    second = run("debug-serve", "--direct", str(checkpoint), *cache)
    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    assert len(fake_build) == 1 and "reusing the cached build" in second.output
    assert served[0][0].artifacts == served[1][0].artifacts
    assert [direct for *_, direct in served] == [False, True]


@pytest.mark.parametrize("command", [["serve"], ["debug-serve", "--direct"]])
def test_a_path_that_is_neither_is_the_same_error_for_both(served, tmp_path, command):
    (tmp_path / "thing").mkdir()
    one_line_error(run(*command, str(tmp_path / "thing")), "neither a bundle")
    one_line_error(run(*command), "needs PATH")
