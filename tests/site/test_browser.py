"""The built site in a real browser: what a reader sees at desktop and phone widths.

Every page of the table of contents is opened in headless Chromium at 1400 px and 400 px, served
over HTTP with every request to another host refused (the site must work offline). With
``SITE_SCREENSHOTS=yes`` (``make site-check SCREENSHOTS=yes``), a full-page screenshot of each is
saved under `_build/browser/`, for a person to look at; no check reads them, and they took about a
quarter of this test's time (0.9 of 3.5 min on 2026-11-28), so they are off by default. The checks:

- no console error, no failed request, no request to another host, every image loaded;
- the primary sidebar toggle opens the table of contents (and, at desktop width, closes it again);
- one search box on screen (no stray second header bar);
- nothing wider than the viewport outside a scroll container; no table that scrolls sideways at
  desktop width;
- no visible output block longer than `MAX_OUTPUT_LINES` lines (long text is folded);
- no build-machine path in any output, and none of the known noise a page hides
  (`casebook.noise.KNOWN_NOISE`);
- a visible version stamp on every page that runs code;
- expected errors styled as errors, their lines wrapped;
- image alt texts that describe, not file paths; figures shown at (nearly) their drawn size at
  desktop width, so their text stays readable; no made-up links from auto-linking.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import sys
import sysconfig
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from booklayout import REPO_ROOT, code_cells, page_source, toc_pages
from casebook.noise import KNOWN_NOISE

HTML_ROOT = REPO_ROOT / "_build" / "html"
SCREENSHOTS = REPO_ROOT / "_build" / "browser"
WIDTHS = (1400, 400)
MAX_OUTPUT_LINES = 60
INSTALL_HINT = (
    "headless Chromium is needed for the browser test of the site: install Debian's package with "
    "`sudo apt-get install -y chromium` (make site-check does this when run as root), or set "
    "CHROMIUM=/path/to/chromium"
)


def chromium_path() -> str:
    path = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path or not Path(path).exists():
        pytest.fail(INSTALL_HINT, pytrace=False)
    return path


def screenshots_wanted() -> bool:
    """Whether to save each page's screenshot: SITE_SCREENSHOTS is "yes" or "no" (unset: no)."""
    value = os.environ.get("SITE_SCREENSHOTS", "no")
    if value not in ("yes", "no"):
        pytest.fail(
            f"SITE_SCREENSHOTS={value!r}: use yes (save a full-page screenshot of every page under "
            "_build/browser/) or no (the default)",
            pytrace=False,
        )
    return value == "yes"


def build_machine_paths() -> list[str]:
    """Absolute paths that only mean something on the machine that built the book."""
    paths = {str(REPO_ROOT), sys.prefix, sys.base_prefix, sysconfig.get_paths()["stdlib"]}
    home = str(Path.home())
    if home not in ("/", ""):
        paths.add(home + "/")
    return sorted(paths, key=len, reverse=True)


def hidden_noise(page_name: str) -> list[str]:
    """The known-noise messages this page hides (all but those its `setup_page(keep=[...])` names),
    as plain text fragments to look for in its outputs."""
    source = page_source(page_name).read_text(encoding="utf-8")
    call = re.search(r"setup_page\((.*?)\)", source)
    kept = set(re.findall(r'"([a-z-]+)"', call.group(1))) if call else set(KNOWN_NOISE)
    return [noise.pattern.replace("\\", "") for name, noise in KNOWN_NOISE.items() if name not in kept]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site_url():
    if not (HTML_ROOT / "index.html").exists():
        pytest.fail("the site is not built: run `make build` first (make test does this)")
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(HTML_ROOT))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    executable = chromium_path()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable)
        yield chromium
        chromium.close()


# Measured in the page, after load: everything the checks below need, as plain data.
_MEASURE = """
(args) => {
  const [maxLines, machinePaths, noise] = args;
  const vw = document.documentElement.clientWidth;
  const shown = (el) => el.checkVisibility({visibilityProperty: true, opacityProperty: true})
                        && !el.closest('details:not([open])');
  const describe = (el) => {
    const cls = (el.className && el.className.baseVal === undefined) ? el.className : '';
    const text = (el.textContent || '').trim().slice(0, 60).replace(/\\s+/g, ' ');
    return `<${el.tagName.toLowerCase()} class="${cls}"> ${text}`;
  };
  const article = document.querySelector('article') || document.body;
  const scrolls = (el) => ['auto', 'scroll', 'hidden'].includes(getComputedStyle(el).overflowX);

  const wide = [];
  for (const el of article.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.right <= vw + 1 || !shown(el)) continue;
    let p = el.parentElement, contained = false;
    while (p && p !== document.body) {
      if (scrolls(p)) { contained = p.getBoundingClientRect().right <= vw + 1; break; }
      p = p.parentElement;
    }
    if (!contained && !(el.parentElement && wide.includes(describe(el.parentElement)))) wide.push(describe(el));
  }
  const scrollingTables = [];
  for (const table of article.querySelectorAll('table')) {
    const box = table.parentElement;
    if (shown(table) && box && scrolls(box) && box.scrollWidth > box.clientWidth + 1) scrollingTables.push(describe(table));
  }

  const outputs = Array.from(document.querySelectorAll('.cell_output'));
  const longOutputs = [];
  for (const pre of document.querySelectorAll('.cell_output pre')) {
    if (!shown(pre)) continue;
    const lines = pre.textContent.replace(/\\n$/, '').split('\\n').length;
    if (lines > maxLines) longOutputs.push(`${lines} lines: ${pre.textContent.slice(0, 80).replace(/\\s+/g, ' ')}`);
  }
  const pathsFound = [];
  for (const out of outputs) {
    for (const p of machinePaths) {
      const text = out.textContent;
      // a path starts a word: "/root/" inside "/opt/rh/gcc-toolset-13/root/usr" is not the home folder
      for (let at = text.indexOf(p); at >= 0; at = text.indexOf(p, at + 1)) {
        if (at > 0 && !/[\\s"'(=:,\\[]/.test(text[at - 1])) continue;
        pathsFound.push(text.slice(Math.max(0, at - 30), at + 90).replace(/\\s+/g, ' '));
        break;
      }
    }
  }
  const stamp = document.querySelector('.casebook-version-stamp');
  // the stamp's folded part lists the hidden messages themselves: look everywhere else
  const lessonOutputs = outputs.filter((out) => !out.querySelector('.casebook-version-stamp'));
  const noiseFound = noise.filter((fragment) => lessonOutputs.some((out) => out.textContent.includes(fragment)));
  const errors = [];
  for (const out of outputs) {
    if (!out.textContent.includes('✗ raised as expected')) continue;
    const block = out.querySelector('.casebook-expected-error');
    if (!block) { errors.push({styled: false, text: out.textContent.slice(0, 80)}); continue; }
    const pre = block.querySelector('pre');
    errors.push({
      styled: parseFloat(getComputedStyle(block).borderLeftWidth) >= 3,
      wraps: getComputedStyle(pre).whiteSpace === 'pre-wrap' && pre.scrollWidth <= pre.clientWidth + 1,
      text: block.textContent.slice(0, 80),
      // a worker's or torch's log line ("W1128 15:18:37.215000 4904 .venv/lib/...py:403] ..."), not the error
      logLine: (block.textContent.match(/(^|\\n)[WIEF]\\d{4} \\d{2}:\\d{2}:\\d{2}\\.\\d+ [^\\n]{0,100}/) || [null])[0],
    });
  }
  const images = Array.from(article.querySelectorAll('img')).map((img) => ({
    src: img.getAttribute('src'), alt: img.getAttribute('alt') || '',
    loaded: img.complete && img.naturalWidth > 0,
    natural: img.naturalWidth, shown: img.getBoundingClientRect().width,
  }));
  const madeUpLinks = Array.from(document.querySelectorAll('a[href^="http://"]'))
    .filter((a) => a.href.replace(/^http:\\/\\//, '').replace(/\\/$/, '') === a.textContent.trim())
    .map((a) => a.href);
  const searchBoxes = Array.from(document.querySelectorAll('.search-button-field, .bd-search'))
    .filter((el) => shown(el) && el.getBoundingClientRect().height > 0).length;
  return {
    pageWidth: document.documentElement.scrollWidth, viewport: vw, wide: wide.slice(0, 5),
    scrollingTables, longOutputs, pathsFound, images, madeUpLinks, searchBoxes, errors,
    noiseFound,
    stamp: stamp && shown(stamp) ? stamp.textContent.trim().split('\\n')[0] : null,
  };
}
"""

_TOC_SHOWN = """
() => {
  const sidebar = document.querySelector('.bd-sidebar-primary');
  if (!sidebar) return false;
  const r = sidebar.getBoundingClientRect();
  const link = sidebar.querySelector('nav a.reference');
  return sidebar.checkVisibility({visibilityProperty: true}) && r.width > 150 && r.left >= -1
    && r.right <= document.documentElement.clientWidth + 1 && !!link && link.checkVisibility();
}
"""


def _click_primary_toggle(page) -> bool:
    toggles = page.locator(".primary-toggle, [aria-label='Toggle primary sidebar']").filter(visible=True)
    if toggles.count() == 0:
        return False
    toggles.first.click()
    page.wait_for_timeout(400)  # the sidebar slides in or out
    return True


def _sidebar_report(page, width: int) -> list[str]:
    """Problems with the primary sidebar toggle; empty when it works."""
    shown_before = page.evaluate(_TOC_SHOWN)
    if not _click_primary_toggle(page):
        return ["no visible 'Toggle primary sidebar' button"]
    shown_after = page.evaluate(_TOC_SHOWN)
    if width < 960:  # phone layout: the table of contents is hidden until the toggle opens it
        return [] if shown_after and not shown_before else ["the toggle did not open the table of contents"]
    if shown_after == shown_before:
        return ["the toggle did not change the sidebar"]
    if not shown_after:
        _click_primary_toggle(page)
        if not page.evaluate(_TOC_SHOWN):
            return ["the toggle hid the table of contents and did not open it again"]
    return []


_reports: dict[tuple[str, int], dict] = {}


def report(browser, site_url: str, page_name: str, width: int) -> dict:
    """Load `page_name` at `width` once; every check reads the same report."""
    key = (page_name, width)
    if key in _reports:
        return _reports[key]
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    console, failed, external = [], [], []
    host = urlsplit(site_url).netloc

    def route(request_route):
        if urlsplit(request_route.request.url).netloc != host:
            external.append(request_route.request.url)
            return request_route.abort()
        return request_route.continue_()

    page.route("**/*", route)
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: console.append(f"uncaught: {e}"))
    page.on("requestfailed", lambda r: failed.append(r.url) if urlsplit(r.url).netloc == host else None)
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.goto(f"{site_url}{page_name}.html", wait_until="networkidle")
    # Images below the fold may be lazy: load them all before looking.
    page.evaluate(
        "Promise.all(Array.from(document.images).map((i) => { i.loading = 'eager'; "
        "return i.decode().catch(() => null); }))"
    )
    data = page.evaluate(_MEASURE, [MAX_OUTPUT_LINES, build_machine_paths(), hidden_noise(page_name)])
    if screenshots_wanted():
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SCREENSHOTS / f"{page_name.replace('/', '__')}-{width}.png", full_page=True)
    data["sidebar"] = _sidebar_report(page, width)
    data.update(console=console, failed=failed, external=external)
    context.close()
    _reports[key] = data
    return data


CASES = [pytest.param(page, width, id=f"{page}@{width}") for page in toc_pages() for width in WIDTHS]


@pytest.mark.parametrize(("page", "width"), CASES)
def test_no_console_error_or_failed_request(browser, site_url, page, width):
    data = report(browser, site_url, page, width)
    assert not data["console"], f"console errors: {data['console']}"
    assert not data["failed"], f"failed requests: {data['failed']}"
    assert not data["external"], f"requests to other hosts (the site must work offline): {data['external']}"


@pytest.mark.parametrize(("page", "width"), CASES)
def test_images_load_and_have_alt_text(browser, site_url, page, width):
    images = report(browser, site_url, page, width)["images"]
    assert not [i["src"] for i in images if not i["loaded"]], "images that did not load"
    path_like = [i for i in images if not i["alt"].strip() or "/" in i["alt"] or i["alt"].endswith(".png")]
    assert not path_like, f"images whose alt text is empty or a file path: {path_like}"
    if width >= 960:  # figures are drawn for the text column: shrunk, their text falls below 11 px
        shrunk = [
            f"{i['src']}: {i['natural']} px shown at {i['shown']:.0f}"
            for i in images
            if i["shown"] < 0.95 * i["natural"]
        ]
        assert not shrunk, f"figures scaled down at desktop width (draw them for the column): {shrunk}"


@pytest.mark.parametrize(("page", "width"), CASES)
def test_sidebar_toggle_opens_the_table_of_contents(browser, site_url, page, width):
    data = report(browser, site_url, page, width)
    assert not data["sidebar"], data["sidebar"]
    assert data["searchBoxes"] <= 1, f"{data['searchBoxes']} search boxes on screen: a second header bar?"


@pytest.mark.parametrize(("page", "width"), CASES)
def test_nothing_wider_than_the_viewport(browser, site_url, page, width):
    data = report(browser, site_url, page, width)
    assert not data["wide"], f"wider than the {width} px viewport, outside a scroll container: {data['wide']}"
    assert data["pageWidth"] <= data["viewport"], f"the page scrolls sideways ({data['pageWidth']} px)"
    if width >= 960:
        assert not data["scrollingTables"], f"tables cut at desktop width: {data['scrollingTables']}"


@pytest.mark.parametrize(("page", "width"), CASES)
def test_outputs_are_short_and_machine_independent(browser, site_url, page, width):
    data = report(browser, site_url, page, width)
    assert not data["longOutputs"], f"output blocks over {MAX_OUTPUT_LINES} lines: {data['longOutputs']}"
    assert not data["pathsFound"], f"build-machine paths in outputs: {data['pathsFound'][:5]}"
    assert not data["noiseFound"], f"known noise the page hides shows in its outputs: {data['noiseFound']}"


@pytest.mark.parametrize(("page", "width"), CASES)
def test_expected_errors_look_like_errors(browser, site_url, page, width):
    for error in report(browser, site_url, page, width)["errors"]:
        assert error["styled"], f"an expected error shown as plain output: {error['text']}"
        assert error["wraps"], f"an expected error whose long lines are cut: {error['text']}"
        assert not error["logLine"], (
            f"an expected error that shows a log line: {error['logLine']!r} in {error['text']}"
        )


@pytest.mark.parametrize(("page", "width"), CASES)
def test_executed_pages_show_a_version_stamp(browser, site_url, page, width):
    data = report(browser, site_url, page, width)
    if code_cells(page):
        assert data["stamp"] and data["stamp"].startswith("Executed"), "no visible version stamp"


@pytest.mark.parametrize(("page", "width"), CASES)
def test_no_made_up_links(browser, site_url, page, width):
    links = report(browser, site_url, page, width)["madeUpLinks"]
    assert not links, f"words turned into links to made-up sites (linkify): {links}"


@pytest.mark.parametrize(("value", "wanted"), [(None, False), ("no", False), ("yes", True)])
def test_screenshots_are_saved_only_when_asked(monkeypatch, value, wanted):
    if value is None:
        monkeypatch.delenv("SITE_SCREENSHOTS", raising=False)
    else:
        monkeypatch.setenv("SITE_SCREENSHOTS", value)
    assert screenshots_wanted() is wanted


def test_a_wrong_screenshots_value_names_the_two_it_takes(monkeypatch):
    monkeypatch.setenv("SITE_SCREENSHOTS", "true")
    with pytest.raises(pytest.fail.Exception, match=r"SITE_SCREENSHOTS='true': use yes .* or no"):
        screenshots_wanted()


def test_missing_chromium_is_reported_with_the_install_command(monkeypatch):
    monkeypatch.setenv("CHROMIUM", "/nonexistent/chromium")
    with pytest.raises(pytest.fail.Exception, match=r"sudo apt-get install -y chromium"):
        chromium_path()
