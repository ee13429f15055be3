"""The HTML report, opened in a real headless browser (Debian's chromium, driven through its
chromedriver) with the network switched off: the page loads whole, a column sorts on a click,
and a click on a question shows what every run retrieved (gold passages marked) and answered.
Screenshots of the summary and of one question go to docs/images/ (docs/querying.md shows
them)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from graphrag_engine.cli import main
from tests.paths import REPO

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
SHOTS = REPO / "docs" / "images"
RUNS = ("bm25", "naive", "hipporag")


@pytest.fixture(scope="module")
def compared(demo_index: Path, tmp_path_factory) -> Path:
    """Three methods with SmolLM2's answers over four demo questions, compared into one report."""
    out = tmp_path_factory.mktemp("browse") / "cmp"
    args = ["compare", str(demo_index), "demo", "--limit", "4", "--out", str(out)]
    args += ["--llm-backend", "transformers"]
    for method in RUNS:
        args += ["--method", method]
    assert main(args) == 0
    return out


@pytest.fixture(scope="module")
def browser():
    """Headless chromium with the flags this closed network needs, and a fresh profile."""
    if not (Path(CHROMIUM).exists() and Path(DRIVER).exists()):
        pytest.fail(
            "the report's browser test needs Debian's chromium and chromium-driver: "
            "apt-get install -y chromium chromium-driver (.ci/run installs them)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--window-size=1280,1000",
    ):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd(
        "Network.emulateNetworkConditions",
        {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1},
    )
    yield driver
    driver.quit()


def test_the_report_page_browses_offline(compared: Path, browser) -> None:
    from selenium.webdriver.common.by import By

    page = compared / "report" / "report.html"
    text = page.read_text()
    assert not re.search(r"""(src|href)=['"]?(https?:)?//""", text), "a file from elsewhere"
    browser.get(page.as_uri())
    assert browser.execute_script("return document.readyState") == "complete"
    images = browser.find_elements(By.CSS_SELECTOR, "#overview img")
    assert images and all(
        browser.execute_script("return arguments[0].naturalWidth", img) > 100 for img in images
    )  # the plots are inline, and they decode
    summary = browser.find_element(By.ID, "summary")
    assert [td.text for td in summary.find_elements(By.CSS_SELECTOR, "tbody td:first-child")] == [
        *RUNS
    ]
    SHOTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(SHOTS / "report-summary.png"))

    # a click on recall@5's name sorts the runs by it, highest first; a second click reverses
    header = summary.find_element(By.XPATH, ".//th[text()='recall@5']")
    column = [th.text for th in summary.find_elements(By.CSS_SELECTOR, "thead th")].index(
        "recall@5"
    )

    def order() -> list[tuple[str, float]]:
        rows = summary.find_elements(By.CSS_SELECTOR, "tbody tr")
        cells = [r.find_elements(By.TAG_NAME, "td") for r in rows]
        return [(c[0].text, float(c[column].get_attribute("data-sort"))) for c in cells]

    header.click()
    down = order()
    assert [v for _, v in down] == sorted((v for _, v in down), reverse=True)
    header.click()
    assert [v for _, v in order()] == sorted(v for _, v in down)

    # a click on a question shows its page: every run's passages, gold marked, and answer
    rows = {m: pq.read_table(compared / "runs" / m / "results.parquet").to_pylist() for m in RUNS}
    first = rows["bm25"][0]
    assert browser.find_element(By.ID, "q-0").is_displayed() is False
    browser.find_element(By.CSS_SELECTOR, "#questions a[href='#q-0']").click()
    section = browser.find_element(By.ID, "q-0")
    assert section.is_displayed() and not browser.find_element(By.ID, "overview").is_displayed()
    assert first["question"] in section.find_element(By.TAG_NAME, "h2").text
    for method in RUNS:
        row = next(r for r in rows[method] if r["qid"] == first["qid"])
        run = section.find_element(By.CSS_SELECTOR, f"section.run[data-run='{method}']")
        ranked = run.find_elements(By.CSS_SELECTOR, "ol li")
        assert [li.text.split()[0] for li in ranked] == row["retrieved_ids"]
        gold = [li.text.split()[0] for li in ranked if "gold" in (li.get_attribute("class") or "")]
        assert gold == [p for p in row["retrieved_ids"] if p in set(row["supporting_ids"])]
        assert row["answer"].strip() and row["answer"].strip() in run.text
    browser.save_screenshot(str(SHOTS / "report-question.png"))

    # back to the list
    section.find_element(By.CSS_SELECTOR, "a.back").click()
    assert browser.find_element(By.ID, "overview").is_displayed()


def test_run_text_cannot_become_markup(tmp_path: Path, compared: Path, browser) -> None:
    """A model's answer is data: markup in it shows as text and runs nothing."""
    import pyarrow as pa
    from selenium.webdriver.common.by import By

    runs = tmp_path / "runs"
    shutil.copytree(compared / "runs", runs)
    table = pq.read_table(runs / "bm25" / "results.parquet")
    answers = table.column("answer").to_pylist()
    answers[0] = "<img src=x onerror=\"document.title='pwned'\"><script>document.title='x'</script>"
    table = table.set_column(table.schema.get_field_index("answer"), "answer", pa.array(answers))
    pq.write_table(table, runs / "bm25" / "results.parquet")
    out = tmp_path / "report"
    assert main(["eval", str(runs / "bm25"), str(runs / "naive"), "--out", str(out)]) == 0
    browser.get((out / "report.html").as_uri() + "#q-0")
    run = browser.find_element(By.CSS_SELECTOR, "#q-0 section.run[data-run='bm25']")
    assert "<script>" in run.text and browser.title == "Evaluation report"
