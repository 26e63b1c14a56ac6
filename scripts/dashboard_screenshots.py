"""Screenshots of each dashboard page into docs/dashboard/*.png, taken in headless Chromium (Selenium with Debian's
chromium and chromium-driver) on a fresh `lahar up --demo`, plus one job that cannot fit so the Jobs page shows why,
and a few vGPU and MIG pods that stay on their cards so the Nodes page's per-card heatmap shows who holds what.

    python scripts/dashboard_screenshots.py [--out docs/dashboard] [--settle 25]

Pages at 1280 wide (the full page height), and the Jobs page at phone width (390). Takes about a minute.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

REPO = Path(__file__).resolve().parents[1]

TOO_BIG = {
    "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "too-big", "namespace": "default"},
    "spec": {"minAvailable": 2, "schedulerName": "volcano", "queue": "default", "tasks": [{
        "name": "w", "replicas": 2, "template": {"spec": {"restartPolicy": "Never", "containers": [{
            "name": "c", "image": "busybox", "resources": {"requests": {"cpu": "500"}}}]}}}]},
}


# pods that stay on their cards while the pages are photographed (the demo's own vGPU and MIG pods end in seconds)
SHARED = [
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"notebook-{i}", "namespace": "default",
                                                     "annotations": {"lahar.sh/sim-duration": "30m"}},
     "spec": {"schedulerName": "volcano", "restartPolicy": "Never", "containers": [{
         "name": "c", "image": "jupyter/base-notebook", "resources": {"requests": {"cpu": "1", "memory": "2Gi"},
         "limits": {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": str(mem),
                    "volcano.sh/vgpu-cores": str(cores)}}}]}}
    for i, (mem, cores) in enumerate([(4096, 30), (8192, 50), (2048, 20)])
] + [
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"infer-{profile}", "namespace": "default",
                                                     "annotations": {"lahar.sh/sim-duration": "30m"}},
     "spec": {"schedulerName": "volcano", "restartPolicy": "Never", "containers": [{
         "name": "c", "image": "nvcr.io/nvidia/tritonserver:24.05-py3",
         "resources": {"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {f"nvidia.com/mig-{profile}": "1"}}}]}}
    for profile in ("1g.10gb", "3g.40gb")
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what: str, fn, timeout: float = 120.0):  # noqa: ANN001, ANN202 - a script
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if got := fn():
                return got
        except Exception:  # noqa: BLE001, S110 - not yet
            pass
        time.sleep(0.5)
    raise SystemExit(f"timed out waiting for {what}")


def _browser(width: int, height: int):  # noqa: ANN202
    from selenium import webdriver

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or "chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                f"--window-size={width},{height}", "--force-device-scale-factor=1"):
        opts.add_argument(arg)
    return webdriver.Chrome(options=opts, service=webdriver.ChromeService(
        executable_path=shutil.which("chromedriver") or "chromedriver"))


def _shoot(driver, url: str, path: Path, width: int, min_height: int) -> None:  # noqa: ANN001
    driver.get(url)
    time.sleep(1.0)
    # the GPU gang's placements opened, as a reader would
    driver.execute_script("document.querySelectorAll('[data-job=\"default/llm-pretrain\"] details')"
                          ".forEach(function (d) { d.open = true; });")
    height = driver.execute_script("return document.documentElement.scrollHeight")
    # the viewport itself set to the page's height (a window resize is clamped to the headless screen)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": max(min_height, min(int(height) + 20, 4000)), "deviceScaleFactor": 1,
        "mobile": width < 640})
    time.sleep(0.5)
    driver.save_screenshot(str(path))
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    print(f"wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "dashboard")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds for the demo's jobs to start running")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lahar-shots-") as tmp:
        data = Path(tmp) / "lahar"
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "KUBECONFIG")}
        env.update(PYTHONUNBUFFERED="1", LAHAR_FLOWER_PORT=str(_free_port()))
        log = (Path(tmp) / "up.out").open("wb")
        up = subprocess.Popen([sys.executable, "-m", "lahar.cli", "up", "--demo", "--data-dir", str(data), "--port",
                               "0", "--dashboard-port", str(_free_port()), "--plain"], cwd=REPO, env=env,
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            info = _wait("lahar up", lambda: (lambda i: i if i.get("ready") else None)(
                json.loads((data / "up.json").read_text())))
            base = info["dashboard"].split("?")[0]
            _wait("the dashboard", lambda: httpx.get(base + "healthz", timeout=2).text == "ok")
            job = Path(tmp) / "too-big.yaml"
            job.write_text(yaml.safe_dump_all([TOO_BIG, *SHARED]))
            subprocess.run(["kubectl", "--kubeconfig", info["kubeconfig"], "apply", "-f", str(job)], check=True,
                           capture_output=True)
            _wait("the GPU gang running", lambda: "llm-pretrain" in httpx.get(
                base + "jobs?fragment=1", headers={"Authorization": f"Bearer {info['dashboard'].split('=', 1)[1]}"},
                timeout=5).text.split("Running", 1)[-1].split("</section>", 1)[0])
            auth = {"Authorization": f"Bearer {info['dashboard'].split('=', 1)[1]}"}
            _wait("the vGPU and MIG pods on their cards", lambda: all(
                f"default/{p['metadata']['name']}" in httpx.get(base + "nodes?fragment=1", headers=auth, timeout=5).text
                for p in SHARED))
            time.sleep(args.settle)
            wide = _browser(1280, 800)
            try:
                wide.get(info["dashboard"])  # the token once; the cookie after
                for page in ("nodes", "jobs", "queues", "policies"):  # nodes first: while the gangs run
                    _shoot(wide, base + page, args.out / f"{page}.png", 1280, 800)
            finally:
                wide.quit()
            phone = _browser(390, 844)
            try:
                phone.get(info["dashboard"])
                _shoot(phone, base + "jobs", args.out / "jobs-phone.png", 390, 844)
            finally:
                phone.quit()
        finally:
            os.killpg(up.pid, signal.SIGINT)
            try:
                up.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(up.pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
