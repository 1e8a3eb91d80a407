"""The course website (mkdocs.yml, tools/docs_hooks.py): it builds with `mkdocs build --strict` (no
broken link, no missing include), every chapter has a page in the nav, the code on a page is
included from its source file, and every page renders in a headless Chromium. Runs in `make test`;
`make docs` serves the site. The browser check needs Debian's `chromium` (.ci/run installs it)."""

from __future__ import annotations

import functools
import html
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

# The site needs requirements.txt's mkdocs packages; a machine without them (the GPU machine's
# own Python) skips this file with the reason instead of erroring. CI must have them.
if os.environ.get("CI") != "true":
    pytest.importorskip("yaml", reason="pyyaml is not installed (pip install -r requirements.txt)")
    pytest.importorskip(
        "mkdocs", reason="mkdocs is not installed (pip install -r requirements.txt)"
    )
    pytest.importorskip(
        "material", reason="mkdocs-material is not installed (pip install -r requirements.txt)"
    )
import yaml

REPO = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(p for p in REPO.glob("chapter*_*") if p.is_dir())
SCREENSHOTS = REPO / "build" / "docs-screenshots"
TITLED_FENCE = re.compile(r'^([ \t]*)```\w+ title="([^"]+)"\n(.*?)^\1```$', flags=re.M | re.S)
SNIPPET_MARKER = re.compile(r"--8(<|&lt;)--")
# Without these, Chromium waits on a network this machine does not have (QUIC, updates, sync).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def load_hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", REPO / "tools" / "docs_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def page_text(path: Path) -> str:
    """A built page's text, tags removed: what a reader sees."""
    return html.unescape(re.sub(r"<[^>]+>", "", path.read_text()))


@pytest.fixture(scope="module")
def build(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """One strict build for the whole module (a few seconds), into a temporary folder."""
    site = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    return result, site


@pytest.fixture(scope="module")
def site(build) -> Path:
    result, site = build
    if result.returncode != 0:
        pytest.fail("the strict build failed (test_site_builds_strictly says why)")
    return site


def test_site_builds_strictly(build):
    result, _ = build
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr[-6000:]}"
    assert "WARNING" not in result.stderr, result.stderr


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_every_chapter_has_a_page_in_the_nav(chapter, site):
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    chapters = next(entry["Chapters"] for entry in config["nav"] if "Chapters" in entry)
    assert f"{chapter.name}/index.md" in chapters, (
        f"add {chapter.name}/index.md to mkdocs.yml's nav"
    )
    built = site / chapter.name / "index.html"
    assert built.exists(), f"no page was built for {chapter.name}"
    title = (chapter / "README.md").read_text().splitlines()[0].removeprefix("# ")
    assert title.replace("`", "") in page_text(built)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_code_quoted_in_a_lesson_is_included_from_its_file(chapter):
    """Each titled block becomes a snippet of exactly the lines it quotes, numbered as in the file."""
    pages = load_hooks().SiteBuilder().build()
    page = pages[f"{chapter.name}/index.md"]
    includes = re.findall(r'^[ \t]*--8<-- "([^"]+):(\d+):(\d+)"$', page, flags=re.M)
    blocks = TITLED_FENCE.findall((chapter / "README.md").read_text())
    assert len(includes) == len(blocks) > 0
    for (indent, title, block), (source, first, last) in zip(blocks, includes, strict=True):
        assert source == f"{chapter.name}/{title}"
        lines = (REPO / source).read_text().splitlines()[int(first) - 1 : int(last)]
        quoted = [line.removeprefix(indent) for line in block.splitlines()]
        assert lines == quoted, f"{source}:{first}:{last} is not the block the lesson quotes"
        assert f'title="{title}" linenums="{first}"' in page


def test_no_page_shows_a_snippet_marker(site):
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 2 * len(CHAPTERS)
    shown = [str(p.relative_to(site)) for p in pages if SNIPPET_MARKER.search(p.read_text())]
    assert shown == [], "these pages show a --8<-- line instead of the file it names"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_pitfall_alerts_become_admonitions(chapter, site):
    alerts = (chapter / "README.md").read_text().count("> [!WARNING]")
    built = (site / chapter.name / "index.html").read_text()
    assert built.count('class="admonition warning"') == alerts
    assert "[!WARNING]" not in built


def test_exercises_page_lists_every_exercise_with_its_command(site):
    text = page_text(site / "exercises" / "index.html")
    checks = sorted(REPO.glob("chapter*_*/exercises/check_*.py"))
    assert checks, "no exercises found"
    for check_file in checks:
        number = re.match(r"chapter(\d+)_", check_file.parents[1].name).group(1)
        command = f"make check EX=ch{number}/{check_file.stem.removeprefix('check_')}"
        assert command in text, f"the exercises page does not list {command}"


def test_home_page_has_the_chapter_map_and_the_two_setup_commands(site):
    home = (site / "index.html").read_text()
    for chapter in CHAPTERS:
        assert f'href="{chapter.name}/"' in home, f"the home page does not link {chapter.name}"
    text = page_text(site / "index.html")
    assert "make tutorial" in text
    assert "make test" in text


def chromium() -> str:
    """Debian's chromium (Playwright's own browser download cannot run on a closed network)."""
    path = shutil.which("chromium")
    if path:
        return path
    message = "install Debian's chromium: apt-get install chromium"
    if os.environ.get("CI") == "true":
        pytest.fail(f"chromium is missing, and CI must run the browser check: {message}")
    pytest.skip(message)


@pytest.fixture(scope="module")
def served(site):
    """The built site on http://127.0.0.1:<free port>, from a thread."""

    class QuietHandler(SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(site))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join()


def test_every_page_renders_in_chromium_with_its_code(site, served):
    executable = chromium()
    from playwright.sync_api import sync_playwright

    pages = sorted(str(p.relative_to(site).parent) for p in site.rglob("index.html"))
    chapters = {chapter.name for chapter in CHAPTERS}
    language = load_hooks().language
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        tab = browser.new_page(viewport={"width": 1280, "height": 900})
        tab.set_default_timeout(20_000)
        errors: list[str] = []
        tab.on("pageerror", lambda error: errors.append(str(error)))
        for path in pages:
            url = f"{served}/{'' if path == '.' else path + '/'}"
            response = tab.goto(url, wait_until="load")
            assert response is not None and response.status == 200, url
            assert tab.locator("nav.md-nav--primary").count() > 0, f"{url}: no navigation"
            assert not SNIPPET_MARKER.search(tab.inner_text("body")), f"{url} shows --8<--"
            # A source page shows its file; a folder's page lists its files.
            source = REPO / path.removeprefix("src/")
            if path in chapters or (path.startswith("src/") and source.is_file()):
                code = tab.locator(".highlight code")
                texts = [t for t in code.all_inner_texts() if t.strip()]
                assert texts, f"{url}: no code block with text"
                # Pygments wraps each token in a <span class="...">: the code is highlighted.
                if path in chapters or language(str(source)) != "text":
                    assert tab.locator(".highlight code span[class]").count() > 0, url
            if path in chapters:
                assert tab.locator(".highlight .filename").count() > 0, f"{url}: no titled code"
                assert tab.locator(".md-footer__link").count() > 0, f"{url}: no footer nav"
        assert errors == [], f"JavaScript errors: {errors}"

        tab.goto(f"{served}/", wait_until="load")
        tab.screenshot(path=str(SCREENSHOTS / "home.png"))
        chapter3 = next(c.name for c in CHAPTERS if c.name.startswith("chapter3_"))
        tab.goto(f"{served}/{chapter3}/", wait_until="load")
        # The first pitfall, with the code around it, rather than the top of the page.
        warnings = tab.locator(".admonition.warning")
        shown = warnings.first if warnings.count() else tab.locator(".highlight .filename").first
        shown.scroll_into_view_if_needed()
        tab.mouse.wheel(0, -200)
        tab.wait_for_timeout(300)
        tab.screenshot(path=str(SCREENSHOTS / "chapter3.png"))
        browser.close()
    assert (SCREENSHOTS / "home.png").stat().st_size > 10_000
    assert (SCREENSHOTS / "chapter3.png").stat().st_size > 10_000
