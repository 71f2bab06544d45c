"""memplan's HTML report, opened in a real headless Chromium.

Debian's ``chromium`` and ``chromium-driver`` packages (installed by ``.ci/run``), driven
by Selenium pointed at the system browser: nothing is downloaded at test time. Each test
writes a report (``memplan report`` or ``PlanResult.to_html``), opens it from disk, and
checks what a person would see: no console error, one drawn rectangle per buffer of the
plan, a hover tooltip with the buffer's facts, a search that highlights (read back from
the canvas pixels), the checker's verdict with the shared bytes in red, zoom, pan, the
live list, the themes and the print layout. Screenshots go to ``$MEMPLAN_SCREENSHOTS``
(else the test's temporary folder).

Without a browser the tests are skipped with the reason, unless ``MEMPLAN_REQUIRE_BROWSER``
is set (``.ci/run`` sets it): then a missing browser fails.
"""

import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")

if not (CHROMIUM and DRIVER):
    if os.environ.get("MEMPLAN_REQUIRE_BROWSER"):
        raise RuntimeError(
            "MEMPLAN_REQUIRE_BROWSER is set but chromium or chromedriver is missing: "
            "apt-get install chromium chromium-driver"
        )
    pytest.skip(
        "no chromium/chromedriver on PATH (apt-get install chromium chromium-driver)",
        allow_module_level=True,
    )

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.actions.wheel_input import ScrollOrigin  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

import memplan  # noqa: E402


@pytest.fixture(scope="session")
def memplan_bin():
    binary = os.environ.get("MEMPLAN_BIN")
    if binary:
        return binary
    subprocess.run(["cargo", "build", "-q", "-p", "memplan-cli"], cwd=ROOT, check=True)
    return str(ROOT / "target/debug/memplan")


def run(binary, *args, expect=0):
    done = subprocess.run([binary, *map(str, args)], capture_output=True, text=True)
    assert done.returncode == expect, (
        f"memplan {' '.join(map(str, args))} exited {done.returncode}, not {expect}:\n"
        f"{done.stdout}\n{done.stderr}"
    )
    return done


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        "--force-device-scale-factor=1",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    yield driver
    driver.quit()


@pytest.fixture
def shots(tmp_path):
    folder = Path(os.environ.get("MEMPLAN_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def open_report(driver, path):
    """Opens the page, waits until it has drawn, and fails on any console error."""
    driver.get_log("browser")  # drop what an earlier page left
    driver.get(Path(path).resolve().as_uri())
    WebDriverWait(driver, 30).until(
        lambda d: d.execute_script("return document.body.dataset.ready") == "1"
    )
    errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert not errors, f"console errors on {path}: {errors}"


def screenshot(driver, folder, name):
    path = folder / name
    assert driver.save_screenshot(str(path)), f"no screenshot {path}"
    assert path.stat().st_size > 10_000, f"{path} is nearly empty"
    return path


def drawn_counts(driver):
    return [
        int(c.get_attribute("data-drawn"))
        for c in driver.find_elements(By.CSS_SELECTOR, "canvas.map")
    ]


def plan_json(binary, problem, planner, tmp_path):
    out = tmp_path / f"{planner}.json"
    run(binary, "plan", problem, "-p", planner, "-f", "json", "-o", out)
    return json.loads(out.read_text())


def nonzero(plan):
    return sum(1 for b in plan["buffers"] if b["size"] > 0)


def pixel(driver, panel, x, y):
    """The RGB of page point (x, y) on the map canvas of plan `panel`."""
    return driver.execute_script(
        """
        const c = document.querySelectorAll('canvas.map')[arguments[0]];
        const r = c.getBoundingClientRect(), k = c.width / r.width;
        const d = c.getContext('2d').getImageData(Math.round((arguments[1] - r.left) * k),
            Math.round((arguments[2] - r.top) * k), 1, 1).data;
        return [d[0], d[1], d[2]];
        """,
        panel,
        x,
        y,
    )


def css_rgb(driver, var):
    value = driver.execute_script(
        "return getComputedStyle(document.documentElement).getPropertyValue(arguments[0]).trim()",
        var,
    )
    assert value.startswith("#") and len(value) == 7, value
    return [int(value[i : i + 2], 16) for i in (1, 3, 5)]


def hover(driver, panel, name):
    """Moves the pointer to the centre of buffer `name` in plan `panel`; returns the point."""
    point = driver.execute_script(
        "return window.memplanReport.locate(arguments[0], arguments[1])", panel, name
    )
    assert point, f"{name} is not on the page"
    canvas = driver.find_elements(By.CSS_SELECTOR, "canvas.map")[panel]
    rect = driver.execute_script(
        "const r = arguments[0].getBoundingClientRect(); return [r.left, r.top, r.width, r.height]",
        canvas,
    )
    dx = point["x"] - (rect[0] + rect[2] / 2)
    dy = point["y"] - (rect[1] + rect[3] / 2)
    ActionChains(driver).move_to_element_with_offset(canvas, int(dx), int(dy)).perform()
    return point


def largest(plan):
    return max(plan["buffers"], key=lambda b: (b["size"], b["id"]))


def test_csv_report_draws_every_buffer_hovers_and_searches(
    browser, memplan_bin, tmp_path, shots
):
    csv = ROOT / "examples/mobilenet_v2.csv"
    page = tmp_path / "mobilenet_v2.html"
    run(memplan_bin, "report", csv, "-o", page)
    plan = plan_json(memplan_bin, csv, "best-of", tmp_path)
    open_report(browser, page)
    assert drawn_counts(browser) == [nonzero(plan)]
    screenshot(browser, shots, "report-csv.png")

    target = largest(plan)
    hover(browser, 0, target["id"])
    tip = browser.find_element(By.ID, "tooltip")
    WebDriverWait(browser, 5).until(lambda d: tip.is_displayed())
    text = tip.text
    assert target["id"] in text
    assert f"{target['size']:,} B" in text
    assert f"[{target['offset']:,}, {target['top']:,})" in text
    assert f"[{target['start']:,}, {target['end']:,})" in text
    screenshot(browser, shots, "report-csv-hover.png")

    box = browser.find_element(By.ID, "search")
    box.send_keys(target["id"])
    WebDriverWait(browser, 5).until(
        lambda d: d.find_element(By.CSS_SELECTOR, "canvas.map").get_attribute(
            "data-highlighted"
        )
        == "1"
    )
    assert browser.find_element(By.ID, "matches").text.startswith("1 match")
    point = hover(browser, 0, target["id"])
    assert pixel(browser, 0, point["x"], point["y"]) == css_rgb(browser, "--hi")
    screenshot(browser, shots, "report-csv-search.png")
    # Enter zooms to the match: the view narrows around it.
    before = browser.execute_script("return window.memplanReport.view()")
    box.send_keys(Keys.ENTER)
    after = browser.execute_script("return window.memplanReport.view()")
    assert after["t1"] - after["t0"] < before["t1"] - before["t0"]
    assert after["t0"] <= target["start"] and after["t1"] >= target["end"]


def test_onnx_report_names_producers_and_lists_what_is_live(
    browser, memplan_bin, tmp_path, shots
):
    model = ROOT / "crates/memplan-onnx/tests/data/small.onnx"
    page = tmp_path / "small_onnx.html"
    run(memplan_bin, "report", model, "-p", "best-of", "-p", "search", "-o", page)
    best = plan_json(memplan_bin, model, "best-of", tmp_path)
    search = plan_json(memplan_bin, model, "search", tmp_path)
    open_report(browser, page)
    assert drawn_counts(browser) == [nonzero(best), nonzero(search)]
    titles = [h.text for h in browser.find_elements(By.CSS_SELECTOR, ".plan h2 span:first-child")]
    assert titles == ["best-of", "search"]

    target = largest(best)
    hover(browser, 0, target["id"])
    tip = browser.find_element(By.ID, "tooltip")
    WebDriverWait(browser, 5).until(lambda d: tip.is_displayed())
    assert target["id"] in tip.text and "produced by" in tip.text

    # A click on the map lists what is live at that step, largest first.
    ActionChains(browser).click().perform()
    rows = browser.find_elements(By.CSS_SELECTOR, "#live-table tbody tr")
    assert rows, "no live buffers listed after a click"
    assert any(target["id"] in r.text for r in rows)
    title = browser.find_element(By.ID, "live-title").text
    assert title.startswith("Live at step")
    sizes = [
        int(r.get_attribute("data-size"))
        for r in rows
        if r.get_attribute("data-size") is not None
    ]
    assert sizes == sorted(sizes, reverse=True) and len(sizes) == len(rows)
    screenshot(browser, shots, "report-onnx.png")


def test_comparison_shows_the_saving_and_the_violations_in_red(
    browser, memplan_bin, tmp_path, shots
):
    graph = ROOT / "examples/small_cnn.json"
    good = plan_json(memplan_bin, graph, "best-of", tmp_path)
    naive = plan_json(memplan_bin, graph, "naive", tmp_path)
    # A hand-edited plan: two buffers live together moved onto the same bytes.
    bad = json.loads(json.dumps(good))
    b = bad["buffers"]
    pair = next(
        (i, j)
        for i in range(len(b))
        for j in range(i + 1, len(b))
        if b[i]["start"] < b[j]["end"] and b[j]["start"] < b[i]["end"] and b[i]["size"] and b[j]["size"]
    )
    b[pair[1]]["offset"] = b[pair[0]]["offset"]
    b[pair[1]].pop("top", None)
    bad["planner"] = "hand-edited"
    bad_path = tmp_path / "bad.json"
    bad_path.write_text(json.dumps(bad))

    page = tmp_path / "compare.html"
    done = run(
        memplan_bin, "report", graph, "-p", "best-of", "-p", "naive",
        "--compare", bad_path, "-o", page, expect=1,
    )
    assert "INVALID" in done.stdout
    open_report(browser, page)
    assert drawn_counts(browser) == [nonzero(good), nonzero(naive), nonzero(bad)]
    badges = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".plan h2 .badge")]
    assert badges == ["valid", "valid", "INVALID"]
    rows = browser.find_elements(By.CSS_SELECTOR, "#summary tbody tr")
    saving = naive["arena_bytes"] - good["arena_bytes"]
    assert saving > 0
    assert "+" in rows[1].text, rows[1].text  # naive is larger than the first plan
    violations = browser.find_element(By.ID, "violations").text
    assert "overlap" in violations and b[pair[0]]["id"] in violations

    # The shared bytes are drawn in red: the middle of the overlap, on the third map.
    overlap = browser.execute_script(
        """
        const p = window.memplanReport.data.plans[2];
        const v = p.violations.find(v => v.kind === 'overlap');
        return [v.steps, v.addresses];
        """
    )
    point = browser.execute_script(
        "return window.memplanReport.point(arguments[0], arguments[1], arguments[2])",
        2,
        (overlap[0][0] + overlap[0][1]) / 2,
        (overlap[1][0] + overlap[1][1]) / 2,
    )
    assert pixel(browser, 2, point["x"], point["y"]) == css_rgb(browser, "--bad")
    screenshot(browser, shots, "report-compare.png")


def test_zoom_pan_reset_theme_and_print(browser, memplan_bin, tmp_path, shots):
    csv = ROOT / "examples/mobilenet_v2.csv"
    page = tmp_path / "zoom.html"
    run(memplan_bin, "report", csv, "-o", page)
    open_report(browser, page)
    canvas = browser.find_element(By.CSS_SELECTOR, "canvas.map")
    full = browser.execute_script("return window.memplanReport.view()")
    ActionChains(browser).scroll_from_origin(ScrollOrigin.from_element(canvas), 0, -300).perform()
    WebDriverWait(browser, 5).until(
        lambda d: d.execute_script("const v = window.memplanReport.view(); return v.t1 - v.t0")
        < full["t1"] - full["t0"]
    )
    zoomed = browser.execute_script("return window.memplanReport.view()")
    ActionChains(browser).move_to_element(canvas).click_and_hold().move_by_offset(
        120, 0
    ).release().perform()
    panned = browser.execute_script("return window.memplanReport.view()")
    assert panned["t0"] < zoomed["t0"], (zoomed, panned)  # dragged right: earlier steps
    ActionChains(browser).double_click(canvas).perform()
    assert browser.execute_script("return window.memplanReport.view()") == full

    light = browser.execute_script("return getComputedStyle(document.body).backgroundColor")
    browser.execute_script(
        "const s = document.getElementById('theme'); s.value = 'dark';"
        "s.dispatchEvent(new Event('change'))"
    )
    dark = browser.execute_script("return getComputedStyle(document.body).backgroundColor")
    assert light != dark
    screenshot(browser, shots, "report-dark.png")
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    try:
        hidden = browser.execute_script(
            "return getComputedStyle(document.querySelector('.controls')).display"
        )
        assert hidden == "none"
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})


def test_python_to_html_draws_plans_side_by_side(browser, tmp_path, shots):
    rng = random.Random(7)
    n = 300
    starts = [rng.randrange(0, 200) for _ in range(n)]
    problem = memplan.Problem.from_lists(
        sizes=[rng.randrange(1, 1 << 16) for _ in range(n)],
        starts=starts,
        ends=[s + rng.randrange(1, 30) for s in starts],
        names=[f"t{i}" for i in range(n)],
    )
    best = memplan.plan(problem)
    naive = memplan.plan(problem, "naive")
    assert best.problem.names == problem.names
    html = best.to_html(compare=[naive], title="two plans from Python")
    page = tmp_path / "python.html"
    page.write_text(html)
    open_report(browser, page)
    assert drawn_counts(browser) == [n, n]
    assert browser.find_element(By.ID, "title").text == "two plans from Python"
    notebook = best._repr_html_()
    assert notebook.startswith("<iframe srcdoc=") and "&lt;canvas" in notebook
    screenshot(browser, shots, "report-python.png")
    # A plan of another problem is refused, not drawn.
    other = memplan.Problem.from_lists(sizes=[1], starts=[0], ends=[1])
    with pytest.raises(memplan.InputError):
        best.to_html(other)


def test_a_report_of_100k_buffers_stays_small_and_draws_them_all(
    browser, memplan_bin, tmp_path
):
    rng = random.Random(1)
    n = 100_000
    lines = ["id,lower,upper,size"]
    for i in range(n):
        start = rng.randrange(0, 200_000)
        lines.append(f"b{i},{start},{start + rng.randrange(1, 400)},{rng.randrange(16, 1 << 20)}")
    csv = tmp_path / "random_100k.csv"
    csv.write_text("\n".join(lines) + "\n")
    page = tmp_path / "random_100k.html"
    run(memplan_bin, "report", csv, "-o", page)
    assert page.stat().st_size <= 10_000_000, page.stat().st_size
    open_report(browser, page)
    assert drawn_counts(browser) == [n]


def test_hostile_names_are_shown_never_run(browser, memplan_bin, tmp_path):
    names = [
        "</script><script>window.pwned = 1</script>",
        "<img src=x onerror=\"window.pwned = 2\">",
        "a&amp;b \"quoted\" 'single'",
    ]
    csv = tmp_path / "hostile.csv"
    rows = ["id,lower,upper,size"]
    for k, name in enumerate(names):
        quoted = '"' + name.replace('"', '""') + '"'
        rows.append(f"{quoted},{k},{k + 2},{1024 * (k + 1)}")
    csv.write_text("\n".join(rows) + "\n")
    page = tmp_path / "hostile.html"
    run(memplan_bin, "report", csv, "-o", page)
    open_report(browser, page)
    assert browser.execute_script("return window.pwned === undefined")
    assert browser.find_elements(By.CSS_SELECTOR, "img") == []
    assert drawn_counts(browser) == [len(names)]
    tip = browser.find_element(By.ID, "tooltip")
    for name in names:
        hover(browser, 0, name)
        WebDriverWait(browser, 5).until(lambda d, name=name: name in tip.text)
    # Clicking lists them, as text.
    ActionChains(browser).click().perform()
    assert names[-1] in browser.find_element(By.ID, "live-table").text
    assert browser.execute_script("return window.pwned === undefined")
