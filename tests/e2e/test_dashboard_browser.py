"""The dashboard in a real browser: headless Chromium (Debian's `chromium` + `chromium-driver`) driven by Selenium,
on `lahar up --demo`. The queue tree shows the demo's queues; a job that cannot fit says why; the GPU + RDMA gang
shows its GPU and VF pairs; a vGPU pod shows on its card; the Policies page reaches the webhook's counters; the
jobs page follows a job to Completed without a reload; no page needs JavaScript.

Skips, saying what is missing, without chromium, chromedriver, the selenium wheel or kubectl.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.builders import pod_template, vcjob
from tests.e2e.test_lahar_up import Up
from tests.support import free_port, wait_for

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
CHROMEDRIVER = shutil.which("chromedriver")

try:
    import selenium  # noqa: F401
    SELENIUM = True
except ImportError:
    SELENIUM = False

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not on PATH"),
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)"),
    pytest.mark.skipif(CHROMEDRIVER is None, reason="no chromedriver on PATH (apt-get install chromium-driver)"),
    pytest.mark.skipif(not SELENIUM, reason="the selenium wheel is not installed (pip install selenium)"),
]


def browser(*, javascript: bool = True) -> Any:
    from selenium import webdriver

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,800", "--no-first-run", "--disable-extensions"):
        opts.add_argument(arg)
    if not javascript:
        opts.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    return webdriver.Chrome(options=opts, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    up = Up(tmp_path_factory.mktemp("dashboard") / "lahar", args=("--demo", "--dashboard-port", str(free_port())))
    try:
        up.start()
        health = up.info["dashboard"].split("?")[0] + "healthz"
        wait_for("the dashboard to answer", lambda: httpx.get(health, timeout=2).text == "ok", timeout=60)
        yield up
    finally:
        up.kill()


@pytest.fixture(scope="module")
def driver(demo: Up) -> Iterator[Any]:
    d = browser()
    try:
        d.get(demo.info["dashboard"])  # ?token= once: the cookie from here on
        yield d
    finally:
        d.quit()


def _until(d: Any, what: str, check: Callable[[], Any], timeout: float = 90.0) -> Any:
    """Poll the page shown (the live updates change it; the test never reloads unless it says so)."""
    def probe() -> Any:
        try:
            return check()
        except Exception:  # noqa: BLE001 - element gone while <main> is swapped: try again
            return None

    try:
        return wait_for(what, probe, timeout=timeout)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{d.find_element('id', 'main').text[-3000:]}") from None


def _apply(up: Up, job: dict, tmp: Path) -> None:
    path = tmp / f"{job['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(job))
    up.kubectl("apply", "-f", str(path))


def _job(name: str, *, cpu: str, duration: str | None = None, replicas: int = 1) -> dict:
    template = pod_template(restart_policy="Never", requests={"cpu": cpu},
                           annotations={"lahar.sh/sim-duration": duration} if duration else None)
    return vcjob(name).queue("default").min_available(replicas).spec(schedulerName="volcano").task(
        "w", replicas, template=template).obj


def test_the_queue_tree_shows_the_demo_queues(demo: Up, driver: Any) -> None:
    from selenium.webdriver.common.by import By

    driver.get(demo.info["dashboard"].split("?")[0] + "queues")
    names = _until(driver, "the demo's queues", lambda: (
        lambda got: got if {"root", "default", "research", "batch"} <= set(got) else None)(
        [r.get_attribute("data-queue") for r in driver.find_elements(By.CSS_SELECTOR, "tr[data-queue]")]))
    assert names[0] == "root"

    def research_row() -> bool | None:  # read in one go: a live update may swap the row between two reads
        row = driver.find_element(By.CSS_SELECTOR, 'tr[data-queue="research"]')
        return (bool(row.find_elements(By.CSS_SELECTOR, ".bar .track")) and "└" in row.text) or None

    assert _until(driver, "the research queue's bar and tree line", research_row, 30)


def test_a_job_that_cannot_fit_shows_its_reason(demo: Up, driver: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    _apply(demo, _job("too-big", cpu="500", replicas=2), tmp_path)
    driver.get(demo.info["dashboard"].split("?")[0] + "jobs")
    # first "no PodGroup yet", then the scheduler's verdict: the enqueue vote and the grouped Event texts
    why = _until(driver, "the pending job's reason", lambda: (lambda text: text if "unschedulable" in text else None)(
        driver.find_element(By.CSS_SELECTOR, 'li[data-job="default/too-big"] ul.why').text))
    assert "enqueue vote" in why and ("overused" in why or "Insufficient cpu" in why), why


def test_the_gpu_gang_shows_its_gpu_and_vf_pairs(demo: Up, driver: Any) -> None:
    from selenium.webdriver.common.by import By

    driver.get(demo.info["dashboard"].split("?")[0] + "jobs")
    pairs = _until(driver, "llm-pretrain's GPU/VF pairs", lambda: [
        c.get_attribute("textContent") for c in driver.find_elements(
            By.CSS_SELECTOR, 'li[data-job="default/llm-pretrain"] td.pairs')] or None)
    assert len(pairs) == 2 and all(p.count("GPU ") == 8 and p.count("↔ VF 0000:") == 8 for p in pairs), pairs


def test_a_vgpu_pod_shows_on_its_card(demo: Up, driver: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    notebook = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "card-holder", "namespace": "default", "annotations": {"lahar.sh/sim-duration": "10m"}},
        "spec": {"schedulerName": "volcano", "restartPolicy": "Never", "containers": [{
            "name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}, "limits": {
                "volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "4096", "volcano.sh/vgpu-cores": "30"}}}]}}
    _apply(demo, notebook, tmp_path)
    driver.get(demo.info["dashboard"].split("?")[0] + "nodes")
    card = _until(driver, "the pod on a T4 card", lambda: next((
        c.text for c in driver.find_elements(By.CSS_SELECTOR, "tr[data-gpu-node] td.card")
        if "default/card-holder" in c.text), None))
    assert "4Gi · 30% cores" in card and "vGPU" in card, card


def test_the_policies_page_reaches_the_webhooks_counters(demo: Up, driver: Any) -> None:
    from selenium.webdriver.common.by import By

    driver.get(demo.info["dashboard"].split("?")[0] + "policies")
    text = _until(driver, "the webhook's counters", lambda: (lambda t: t if "The webhook's counters" in t and (
        "since the webhook started" in t.lower()) else None)(driver.find_element(By.ID, "main").text), 60)
    assert "Not shown" not in text, text


def test_the_jobs_page_follows_a_job_to_completed_without_a_reload(demo: Up, driver: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    driver.get(demo.info["dashboard"].split("?")[0] + "jobs")
    _until(driver, "the live stream", lambda: "live" in driver.find_element(By.ID, "live").text or None, 20)
    driver.execute_script("window.__noReload = 'still here';")
    _apply(demo, _job("short", cpu="100m", duration="2s"), tmp_path)
    selector = 'li[data-job="default/short"]'
    _until(driver, "the new job to appear", lambda: driver.find_elements(By.CSS_SELECTOR, selector) or None)
    started = time.monotonic()
    _until(driver, "the job to show Completed", lambda: driver.find_element(
        By.CSS_SELECTOR, selector).get_attribute("data-phase") == "Completed" or None, 120)
    assert driver.execute_script("return window.__noReload;") == "still here", "the page was reloaded"
    assert time.monotonic() - started < 120


def test_the_pages_work_without_javascript(demo: Up) -> None:
    from selenium.webdriver.common.by import By

    d = browser(javascript=False)
    try:
        d.get(demo.info["dashboard"])
        for page in ("queues", "jobs", "nodes", "policies"):
            d.get(demo.info["dashboard"].split("?")[0] + page)
            assert d.find_element(By.TAG_NAME, "h1").text.startswith(page.capitalize()), page
        d.get(demo.info["dashboard"].split("?")[0] + "nodes")
        assert d.find_elements(By.CSS_SELECTOR, "table.heatmap td.heat")
    finally:
        d.quit()
