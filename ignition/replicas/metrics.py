"""The router's /metrics: every replica's exposition, each sample labelled ``replica``,
merged family by family (Prometheus wants one HELP/TYPE per family)."""

from __future__ import annotations

from collections.abc import Mapping


def _family(sample_name: str, known: dict[str, list[str]]) -> str:
    """The family a sample belongs to (histogram and counter suffixes folded)."""
    if sample_name in known:
        return sample_name
    for suffix in ("_bucket", "_count", "_sum", "_total", "_created"):
        if sample_name.endswith(suffix) and sample_name[: -len(suffix)] in known:
            return sample_name[: -len(suffix)]
    return sample_name


def labelled(line: str, label: str, value: str) -> str:
    """``name{a="b"} 1`` -> ``name{replica="r",a="b"} 1`` (and ``name 1`` likewise)."""
    pair = f'{label}="{value}"'
    name_end = min((i for i in (line.find("{"), line.find(" ")) if i >= 0), default=len(line))
    if line[name_end : name_end + 1] == "{":
        rest = line[name_end + 1 :]
        return f"{line[:name_end]}{{{pair}{',' if not rest.startswith('}') else ''}{rest}"
    return f"{line[:name_end]}{{{pair}}}{line[name_end:]}"


def merge(texts: Mapping[str, str], label: str = "replica") -> str:
    """One exposition of ``{replica: its /metrics text}``, families merged in order."""
    headers: dict[str, list[str]] = {}
    samples: dict[str, list[str]] = {}
    for replica, text in texts.items():
        for line in text.splitlines():
            if not line.strip():
                continue
            if line.startswith("#"):
                parts = line.split(maxsplit=3)
                if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                    family = headers.setdefault(parts[2], [])
                    samples.setdefault(parts[2], [])
                    if not any(h.split(maxsplit=2)[1] == parts[1] for h in family):
                        family.append(line)
                continue
            name = line.split("{", 1)[0].split(" ", 1)[0]
            family = _family(name, headers)
            samples.setdefault(family, []).append(labelled(line, label, replica))
    out: list[str] = []
    for family, lines in samples.items():
        out.extend(headers.get(family, []))
        out.extend(lines)
    return "\n".join(out) + "\n"
