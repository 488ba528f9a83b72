"""The dashboard in a real headless browser: Debian's Chromium driven by Selenium. It
renders the timeline of a served run, updates while requests stream and logs no console
errors; a screenshot is kept as a test artifact (in pytest's tmp folder, path printed)."""

from __future__ import annotations

import shutil
import threading
import time

import httpx
import pytest

from tests.server.conftest import running_server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="no Chromium binary (apt-get install chromium chromium-driver; .ci/run does)",
)


def browser():
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1100,760"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(DRIVER))


def wait_for(check, timeout_s: float = 20.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("the page did not get there in time")


def test_the_page_renders_and_updates_while_requests_stream(bundle, tmp_path):
    with running_server(bundle, "serve") as url:
        driver = browser()
        try:
            driver.get(f"{url}/dashboard")
            frames = lambda: int(driver.find_element("id", "timeline").get_attribute("data-frames"))  # noqa: E731
            status = lambda: driver.find_element("id", "status").text  # noqa: E731
            wait_for(lambda: "frames" in status())
            count = lambda: int(status().split()[0])  # noqa: E731
            before = count()
            body = {"prompt": "hello", "max_tokens": 24, "ignore_eos": True, "stream": True}

            def stream() -> None:
                with httpx.stream("POST", f"{url}/v1/completions", json=body, timeout=60) as r:
                    for _ in r.iter_lines():
                        pass

            streams = [threading.Thread(target=stream) for _ in range(3)]
            for t in streams:
                t.start()
            # the page polls: its frame count grows without a reload
            wait_for(lambda: count() > before and frames() > 0)
            for t in streams:
                t.join()
            wait_for(lambda: driver.find_element("id", "reason").text not in ("", "–"))
            shot = tmp_path / "dashboard.png"
            driver.save_screenshot(str(shot))
            print(f"dashboard screenshot: {shot}")
            errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
            assert errors == []
        finally:
            driver.quit()
