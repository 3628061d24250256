"""Pareto report: command wall time, report size, and the time headless Chromium takes to load
and render report.html (target: under 3 MB, renders within a couple of seconds).

Run: python benchmarks/bench_report.py   (needs chromium and playwright for the render time)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    exe = shutil.which("planner")
    cmd = [exe] if exe else [sys.executable, "-m", "planner"]
    with tempfile.TemporaryDirectory() as tmp:
        for net, budget in (("alexnet", "16gpus"), ("inception_v3", "64gpus")):
            out = Path(tmp) / net
            t0 = time.perf_counter()
            subprocess.run(
                [*cmd, "pareto", net, "--budget", budget, "--out", str(out)],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            dt = time.perf_counter() - t0
            html = out / "report.html"
            print(
                f"planner pareto {net} --budget {budget}: {dt:.2f} s; report.html {html.stat().st_size / 1e3:,.0f} kB, "
                f"trials.csv {(out / 'trials.csv').stat().st_size / 1e6:,.1f} MB"
            )
            render(html)


def render(html: Path) -> None:
    chromium = shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("  render time: skipped (pip install playwright)")
        return
    if not chromium:
        print("  render time: skipped (apt-get install chromium)")
        return
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        t0 = time.perf_counter()
        page.goto(html.as_uri(), wait_until="load")
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        dt = time.perf_counter() - t0
        browser.close()
    print(f"  headless Chromium load and first paint: {dt * 1e3:,.0f} ms")


if __name__ == "__main__":
    main()
