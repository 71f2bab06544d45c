#!/usr/bin/env python3
"""How big and how fast memplan's HTML report is at scale, measured in a real Chromium.

    python3 scripts/bench_report.py [--buffers 100000] [--repeat 5] [--memplan BIN]
        [--screenshots DIR]

Generates a random minimalloc CSV (seeded), times `memplan report` on it, and opens the
page in headless Chromium (Debian's chromium and chromedriver, through Selenium) --repeat
times: the time from navigation start until the page has drawn every plan (the page's own
`data-ready-ms`, from `performance.now()`), then the time of one full redraw after each of
ten wheel zooms and ten drag pans. With --screenshots and ../shared beside the clone it
also writes the screenshots doc/ shows: resnet50 (best-of against search) and a TFLite
Micro comparison (TFLM's own greedy plan against memplan's), each report checked to draw
every buffer of its plans.
"""

import argparse
import json
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.actions.wheel_input import ScrollOrigin
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


def browser(width=1400, height=1000):
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", "--force-device-scale-factor=1"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def open_page(driver, path):
    driver.get_log("browser")
    driver.get(Path(path).resolve().as_uri())
    WebDriverWait(driver, 60).until(lambda d: d.execute_script("return document.body.dataset.ready") == "1")
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    if errors:
        sys.exit(f"console errors on {path}: {errors}")
    return float(driver.execute_script("return document.body.dataset.readyMs"))


def draw_ms(driver, action):
    """Runs `action` and returns how long the redraw it caused took (ms)."""
    frames = int(driver.execute_script("return document.body.dataset.frames"))
    action.perform()
    WebDriverWait(driver, 10).until(
        lambda d: int(d.execute_script("return document.body.dataset.frames")) > frames)
    return float(driver.execute_script("return document.body.dataset.drawMs"))


class ThemeSwitch:
    """An action for draw_ms: the theme select set to `theme` (a full redraw)."""

    def __init__(self, driver, theme):
        self.driver, self.theme = driver, theme

    def perform(self):
        self.driver.execute_script(
            "const s = document.getElementById('theme'); s.value = arguments[0];"
            "s.dispatchEvent(new Event('change'))", self.theme)


def report(binary, args, out, cwd=None):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([binary, "report", *map(str, args), "-o", str(out)],
                          capture_output=True, text=True, cwd=cwd)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        sys.exit(f"memplan report {args} failed:\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--buffers", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--memplan", default=str(ROOT / "target/release/memplan"))
    ap.add_argument("--screenshots", type=Path)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="memplan-report-bench-"))
    rng = random.Random(1)
    lines = ["id,lower,upper,size"]
    for i in range(args.buffers):
        start = rng.randrange(0, 2 * args.buffers)
        lines.append(f"tensor_{i},{start},{start + rng.randrange(1, 400)},{rng.randrange(16, 1 << 20)}")
    csv = tmp / "random.csv"
    csv.write_text("\n".join(lines) + "\n")
    page = tmp / "random.html"
    wall, cpu, _ = report(args.memplan, [csv], page)
    size = page.stat().st_size
    driver = browser()
    try:
        ready = [open_page(driver, page) for _ in range(args.repeat)]
        drawn = driver.execute_script("return document.querySelector('canvas.map').dataset.drawn")
        canvas = driver.find_element(By.CSS_SELECTOR, "canvas.map")
        # A full redraw of every buffer (the theme switched, nothing zoomed).
        full = [draw_ms(driver, ThemeSwitch(driver, theme)) for theme in ["dark", "light"] * 5]
        zooms, pans = [], []
        for _ in range(10):
            zooms.append(draw_ms(driver, ActionChains(driver).scroll_from_origin(
                ScrollOrigin.from_element(canvas), 0, -120)))
        for _ in range(10):
            pans.append(draw_ms(driver, ActionChains(driver).move_to_element(canvas)
                                .click_and_hold().move_by_offset(-40, 10).release()))
        print(json.dumps({
            "buffers": args.buffers,
            "drawn": int(drawn),
            "report_wall_s": round(wall, 3),
            "report_cpu_s": round(cpu, 3),
            "html_bytes": size,
            "open_to_drawn_ms": [round(r) for r in ready],
            "open_to_drawn_median_ms": round(statistics.median(ready)),
            "redraw_full_view_median_ms": round(statistics.median(full), 1),
            "redraw_after_zoom_median_ms": round(statistics.median(zooms), 1),
            "redraw_after_pan_median_ms": round(statistics.median(pans), 1),
        }, indent=2))
        if args.screenshots:
            shots(args, driver, tmp)
    finally:
        driver.quit()


def shots(args, driver, tmp):
    if not SHARED.is_dir():
        sys.exit(f"--screenshots needs {SHARED} (resnet50.onnx, vww_mbv1_025.tflite)")
    args.screenshots.mkdir(parents=True, exist_ok=True)
    cases = [
        ("report-resnet50.png", ["../shared/models/resnet50.onnx", "-p", "best-of", "-p", "search"]),
        ("report-tflm.png", ["../shared/tflite/vww_mbv1_025.tflite", "-p", "tflm-greedy", "-p", "best-of"]),
    ]
    for name, cli in cases:
        page = tmp / (name + ".html")
        _, _, out = report(str(Path(args.memplan).resolve()), cli, page, cwd=ROOT)
        print(out, end="")
        driver.set_window_size(1400, 1500)
        open_page(driver, page)
        data = driver.execute_script(
            "const d = window.memplanReport.data; return d.plans.map(p => d.problems[p.problem].size.filter(s => s > 0).length)")
        drawn = [int(c.get_attribute("data-drawn")) for c in driver.find_elements(By.CSS_SELECTOR, "canvas.map")]
        if drawn != data:
            sys.exit(f"{name}: drawn {drawn}, plans have {data} buffers")
        # Click the busiest step of the first plan: the page lists what is live there.
        point = driver.execute_script("""
            const p = window.memplanReport.data.problems[0];
            let k = 0; for (let j = 1; j < p.L.length; j++) if (p.L[j] > p.L[k]) k = j;
            return window.memplanReport.point(0, p.T[k] + 0.5, 0);""")
        canvas = driver.find_element(By.CSS_SELECTOR, "canvas.map")
        rect = canvas.rect
        ActionChains(driver).move_to_element_with_offset(
            canvas, int(point["x"] - rect["x"] - rect["width"] / 2),
            int(point["y"] - rect["y"] - rect["height"] / 2) - 2).click().perform()
        driver.save_screenshot(str(args.screenshots / name))
        print(f"wrote {args.screenshots / name}")


if __name__ == "__main__":
    main()
