"""The course website (mkdocs.yml, tools/docs_hooks.py): it builds with `mkdocs build --strict` (no
broken link, no missing include), every chapter, exercise and results page has a place in the nav,
the code on a page is included from its source file, search puts the lessons first, the course
itself is a download on the site, and every page renders in a headless Chromium at 1400 px and on
a 390-px phone, with no page that scrolls sideways and no table or code block wider than its
column unless it scrolls with a visible cue. Runs in `make test`; `make docs` serves the site. The
browser checks need Debian's `chromium` (.ci/run installs it). They save screenshots to
build/docs-screenshots; to refresh the committed ones:
`DOCS_SCREENSHOTS=docs/screenshots .venv/bin/python -m pytest tests/test_docs.py -k chromium`."""

from __future__ import annotations

import functools
import html
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

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

# One worker for the whole file under pytest -n: the site fixture is per module, so each worker
# that ran a test of it would build the site again (15-20 s on 2 cores).
pytestmark = pytest.mark.xdist_group("docs")

REPO = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(p for p in REPO.glob("chapter*_*") if p.is_dir())
# Every lesson page: a chapter's README.md, chapter 5's parts, each chapter's further/ pages.
LESSONS = [
    page
    for chapter in CHAPTERS
    for page in [
        chapter / "README.md",
        *sorted(p for p in chapter.glob("*.md") if p.name != "README.md"),
        *sorted(chapter.glob("further/*.md")),
    ]
]
SCREENSHOTS = Path(os.environ.get("DOCS_SCREENSHOTS", REPO / "build" / "docs-screenshots"))
# A laptop, and a phone (an iPhone's 390 css px; its height matters only for the screenshots).
VIEWPORTS = {1400: {"width": 1400, "height": 1000}, 390: {"width": 390, "height": 844}}
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
    # A chapter in parts is a section of the nav: {"Chapter 5": [index.md, part1_..., ...]}.
    chapters = [
        page
        for entry in chapters
        for page in ([entry] if isinstance(entry, str) else next(iter(entry.values())))
    ]
    assert f"{chapter.name}/index.md" in chapters, (
        f"add {chapter.name}/index.md to mkdocs.yml's nav"
    )
    built = site / chapter.name / "index.html"
    assert built.exists(), f"no page was built for {chapter.name}"
    title = (chapter / "README.md").read_text().splitlines()[0].removeprefix("# ")
    assert title.replace("`", "") in page_text(built)


def built_page(lesson: Path) -> str:
    """The site's page (in docs_dir) generated from a lesson file."""
    return load_hooks().page_for(str(lesson.relative_to(REPO)))


def built_html(site: Path, lesson: Path) -> Path:
    page = built_page(lesson).removesuffix(".md")
    return (
        site / (page.removesuffix("index") if page.endswith("index") else page + "/") / "index.html"
    )


@functools.cache
def generated_pages() -> dict[str, str]:
    return load_hooks().SiteBuilder().build()


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: str(p.relative_to(REPO)))
def test_code_quoted_in_a_lesson_is_included_from_its_file(lesson):
    """Each titled block becomes a snippet of exactly the lines it quotes, numbered as in the file."""
    page = generated_pages()[built_page(lesson)]
    includes = re.findall(r'^[ \t]*--8<-- "([^"]+):(\d+):(\d+)"$', page, flags=re.M)
    blocks = TITLED_FENCE.findall(lesson.read_text())
    assert len(includes) == len(blocks)
    folder = lesson.parent.relative_to(REPO)
    for (indent, title, block), (source, first, last) in zip(blocks, includes, strict=True):
        assert source == os.path.normpath(f"{folder}/{title}")
        lines = (REPO / source).read_text().splitlines()[int(first) - 1 : int(last)]
        quoted = [line.removeprefix(indent) for line in block.splitlines()]
        assert lines == quoted, f"{source}:{first}:{last} is not the block the lesson quotes"
        assert f'title="{title} (lines {first}-{last})" linenums="{first}"' in page


def test_no_page_shows_a_snippet_marker(site):
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 2 * len(CHAPTERS)
    shown = [str(p.relative_to(site)) for p in pages if SNIPPET_MARKER.search(p.read_text())]
    assert shown == [], "these pages show a --8<-- line instead of the file it names"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: str(p.relative_to(REPO)))
def test_pitfall_alerts_become_admonitions(lesson, site):
    alerts = lesson.read_text().count("> [!WARNING]")
    built = built_html(site, lesson).read_text()
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


def test_chapter_pages_show_the_plots_they_link(site):
    """A lesson that links a plot (a .png) shows it on its page; on GitHub the link is enough."""
    for lesson in LESSONS:
        plots = set(re.findall(r"\]\(([^)\s]+\.png)\)", lesson.read_text()))
        built = built_html(site, lesson).read_text()
        shown = set(re.findall(r'<img [^>]*src="([^"]+\.png)"', built))
        for plot in plots:
            name = Path(plot).name
            assert any(Path(s).name == name for s in shown), f"{lesson} links {plot}"


def test_chapter_pages_offer_their_notebook_for_download(site):
    for chapter in CHAPTERS:
        built = (site / chapter.name / "index.html").read_text()
        for notebook in chapter.glob("*.ipynb"):
            assert f'href="{notebook.name}"' in built and "download=" in built, chapter.name
            assert (site / chapter.name / notebook.name).read_bytes() == notebook.read_bytes()


def test_notebook_pages_show_what_each_cell_printed(site):
    """As PyTorch's and Triton's tutorial sites do: the outputs of the executed copy
    (docs/notebooks/, tools/execute_notebooks.py), with where it ran and each cell's time."""
    for chapter in CHAPTERS:
        for notebook in chapter.glob("*.ipynb"):
            page = site / "src" / chapter.name / notebook.name / "index.html"
            text = page_text(page)
            assert "Executed on" in text and "no GPU" in text, f"{page}: where it ran"
            code_cells = sum(
                cell["cell_type"] == "code" for cell in json.loads(notebook.read_text())["cells"]
            )
            assert text.count("ran in ") == code_cells, f"{notebook.name}: a cell without a time"


def test_every_perf_page_has_a_title_and_a_line_of_context(site):
    """docs/perf/ holds what scripts printed; the site puts a title and context above each."""
    pages = sorted((site / "perf").rglob("index.html"))
    assert len(pages) > 10
    for page in pages:
        built = page.read_text()
        title = re.search(r"<h1[^>]*>(.*?)</h1>", built, flags=re.S)
        assert title, f"{page.relative_to(site)} has no heading"
        after = built[title.end() :].lstrip()
        assert after.startswith("<p>"), f"{page.relative_to(site)}: no context under its title"


def test_search_leaves_out_source_pages(site):
    """Searching `TORCH_LIBRARY` finds the lessons, not the hundred files that use it."""
    index = json.loads((site / "search" / "search_index.json").read_text())
    locations = {doc["location"].split("#")[0] for doc in index["docs"]}
    sources = [loc for loc in locations if loc.startswith("src/") and ".ipynb" not in loc]
    assert sources == [], f"source pages in the search index: {sources[:5]}"
    assert {f"{chapter.name}/" for chapter in CHAPTERS} <= locations


def test_no_built_page_names_a_made_up_address(site):
    """Unpublished, the site has no canonical links and no sitemap: no placeholder domain."""
    named = [
        str(p.relative_to(site))
        for p in site.rglob("*")
        if p.suffix in {".html", ".xml", ".json", ".js"} and "example.org" in p.read_text()
    ]
    assert named == []
    assert 'rel="canonical"' not in (site / "index.html").read_text()


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    """The site as built to be published: its address and repository from the environment."""
    site = tmp_path_factory.mktemp("published")
    env = {
        **os.environ,
        "NO_MKDOCS_2_WARNING": "1",
        "COURSE_SITE_URL": "https://course.test/pytorch-extensions/",
        "COURSE_REPO_URL": "https://github.com/someone/pytorch-extensions-course",
    }
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return site


def test_a_published_site_has_its_address_a_clone_command_and_edit_links(published):
    home = (published / "index.html").read_text()
    assert '<link rel="canonical" href="https://course.test/pytorch-extensions/">' in home
    assert "git clone --branch main https://github.com/someone/pytorch-extensions-course.git" in (
        html.unescape(home)
    )
    assert (published / "sitemap.xml").read_text().count("<loc>https://course.test/") > 50
    styles = re.findall(
        r'<link rel="stylesheet" href="([^"]+)"', (published / "404.html").read_text()
    )
    assert styles and all(href.startswith("/pytorch-extensions/") for href in styles), styles
    # A generated page's edit link opens the file it was made from.
    edits = {
        "index.html": "README.md",
        "chapter3_cuda_kernels/index.html": "chapter3_cuda_kernels/README.md",
        "perf/h100/lstm_layer/index.html": "docs/perf/h100/lstm_layer.md",
        "src/chapter5_extensions/csrc/relu.cpp/index.html": "chapter5_extensions/csrc/relu.cpp",
    }
    for built, source in edits.items():
        link = f"https://github.com/someone/pytorch-extensions-course/edit/main/{source}"
        assert f'href="{link}"' in (published / built).read_text(), built
        assert (REPO / source).is_file()


def test_the_course_is_a_download_on_its_home_page(site):
    """The site alone is enough to start: its home page links a zip of the whole repository."""
    import zipfile

    home = (site / "index.html").read_text()
    assert 'href="pytorch-extensions-course.zip"' in home and "download" in home
    with zipfile.ZipFile(site / "pytorch-extensions-course.zip") as archive:
        names = set(archive.namelist())
        run = archive.getinfo("pytorch-extensions-course/.ci/run")
    wanted = [
        "Makefile",
        "README.md",
        "requirements.txt",
        *(f"{c.name}/README.md" for c in CHAPTERS),
    ]
    missing = [w for w in wanted if f"pytorch-extensions-course/{w}" not in names]
    assert missing == []
    assert run.external_attr >> 16 & 0o111, ".ci/run must stay executable"
    leaked = [n for n in names if n.split("/")[1] in {".venv", "build", ".git"}]
    assert leaked == [], leaked[:5]


def perf_pages() -> list[str]:
    return sorted(str(p.relative_to(REPO / "docs")) for p in (REPO / "docs/perf").glob("*/*.md"))


def test_every_results_page_is_in_the_index_and_the_navigation(site):
    """docs/perf/README.md lists each results page once, and the site's sidebar has them all."""
    index = (REPO / "docs/perf/README.md").read_text()
    listed = re.findall(r"^\| \[[^\]]+\]\(([\w./-]+\.md)\) \|", index, flags=re.M)
    pages = [p.removeprefix("perf/") for p in perf_pages()]
    assert sorted(listed) == sorted(set(listed)), "a page is listed twice"
    assert sorted(listed) == pages, "docs/perf/README.md must list every results page once"
    sidebar = (site / "perf" / "index.html").read_text()
    for page in pages:
        assert f'href="{page.removesuffix(".md")}/"' in sidebar, f"{page} is not in the nav"


def test_a_results_page_has_its_index_title_neighbours_and_plot(site):
    index = (REPO / "docs/perf/README.md").read_text()
    for page in perf_pages():
        built = (site / page.removesuffix(".md") / "index.html").read_text()
        title = re.search(rf"\[([^\]]+)\]\({re.escape(page.removeprefix('perf/'))}\)", index)[1]
        h1 = re.search(r"<h1[^>]*>(.*?)</h1>", built, flags=re.S)[1]
        assert page_text_of(h1).strip().removesuffix("¶") == page_text_of(title), page
        assert "md-footer__link--prev" in built or "md-footer__link--next" in built, page
        plot = (REPO / "docs" / page).with_suffix(".png")
        if plot.is_file():
            assert re.search(rf'<img [^>]*src="[^"]*{plot.name}"', built), f"{page}: no plot"


def test_every_exercise_has_a_page_to_work_from(site):
    """Statement, the command that grades it, what a pass needs, and the solution folded."""
    for check_file in sorted(REPO.glob("chapter*_*/exercises/check_*.py")):
        number = re.match(r"chapter(\d+)_", check_file.parents[1].name).group(1)
        name = check_file.stem.removeprefix("check_")
        page = site / "exercises" / f"ch{number}_{name}" / "index.html"
        assert page.is_file(), f"no page for ch{number}/{name}"
        built = page.read_text()
        text = page_text(page)
        assert f"make check EX=ch{number}/{name}" in text
        assert "The task" in text and "What a pass needs" in text, page
        source = re.search(r'^SOURCE = "([^"]+)"', check_file.read_text(), flags=re.M)[1]
        # The files built with the learner's (chapter 3's ops, chapter 5's kernels) are linked.
        given = re.search(r"^GIVEN = \[(.*)\]", check_file.read_text(), flags=re.M)
        for name_given in re.findall(r'"([^"]+)"', given[1]) if given else []:
            assert f"exercises/{name_given}/" in built, f"{page} does not link {name_given}"
        if (REPO / "solutions" / check_file.parents[1].name / source).is_file():
            fold = re.search(r"<details class=\"success\">(.*?)</details>", built, flags=re.S)
            assert fold and "Show the reference solution" in fold[1], page
        assert "md-footer__link--next" in built or "md-footer__link--prev" in built


def test_an_excerpt_title_links_to_its_lines_on_the_file_page(site):
    linked = 0
    for lesson in LESSONS:
        built = built_html(site, lesson)
        for href, first in re.findall(
            r'<span class="filename"><a href="([^"#]+)#__codelineno-0-(\d+)"', built.read_text()
        ):
            target = (built.parent / href / "index.html").resolve()
            assert f'id="__codelineno-0-{first}"' in target.read_text(), (lesson, href, first)
            linked += 1
        unlinked = re.findall(r'<span class="filename">[^<]*\(lines', built.read_text())
        assert unlinked == [], f"{lesson}: excerpt titles without a link: {unlinked[:3]}"
    assert linked == sum(len(TITLED_FENCE.findall(lesson.read_text())) for lesson in LESSONS)


# Queries a learner would type, each answered first by a lesson or the troubleshooting page.
SEARCHES = [
    "cuDNN",
    "gradcheck",
    "undefined symbol",
    "shared memory",
    "torch.library",
    "autocast",
    "stable ABI",
    "opcheck",
    "coalescing",
    "LSTM",
]


def test_search_puts_a_lesson_first(site, served):
    """Material's own search, in the browser, with the site's whole index."""
    executable = chromium()
    from urllib.parse import quote

    from playwright.sync_api import sync_playwright

    lessons = {
        built_page(lesson).removesuffix("index.md").removesuffix(".md") for lesson in LESSONS
    }
    firsts = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        tab = browser.new_page(viewport=VIEWPORTS[1400])
        for query in SEARCHES:
            tab.goto(f"{served}/?q={quote(query)}", wait_until="load")
            tab.wait_for_selector(".md-search-result__item", timeout=20_000)
            href = tab.eval_on_selector(".md-search-result__item > a", "a => a.href")
            firsts[query] = urlsplit(href).path.strip("/")
        browser.close()
    wrong = {
        query: first
        for query, first in firsts.items()
        if first.rstrip("/") + "/" not in {f"{p.rstrip('/')}/" for p in lessons}
        and first != "troubleshooting"
    }
    assert wrong == {}, f"first results that are not a lesson: {wrong}"


def test_troubleshooting_shows_no_long_capture_unfolded(site):
    """A long traceback or failed build opens with its command and last lines; the whole capture
    is in a fold below. (A short capture, or one that is a story, not a traceback, stays open.)"""
    built = (site / "troubleshooting" / "index.html").read_text()
    unfolded = re.sub(r"<details.*?</details>", "", built, flags=re.S)
    for block in re.findall(r"<pre.*?</pre>", unfolded, flags=re.S):
        lines = page_text_of(block).strip().splitlines()
        failure = any(line.strip().startswith(("Traceback", "FAILED")) for line in lines)
        assert len(lines) <= 20 or not failure, f"{len(lines)} lines shown unfolded: {lines[:2]}"
    for capture in sorted((REPO / "docs" / "errors").glob("*.txt")):
        last = capture.read_text().strip().splitlines()[-1]
        assert html.escape(last, quote=False) in built, f"{capture.name} is not on the page"


def page_text_of(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


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


# What the browser check reads on each page, in one round trip: whether it has the navigation and
# the footer, a snippet marker, its code blocks (and whether Pygments highlighted them), titled
# code, and every table or code block wider than the content column without a scroll cue. The
# box that cuts such an element is the element itself or the ancestor that clips it (Material
# wraps a table in .md-typeset__scrollwrap); it must scroll and show docs/stylesheets/course.css's
# cue, a gradient background attached to the scrolled content ("local").
PAGE_CHECK = """() => {
  const article = document.querySelector("article.md-content__inner");
  const column = document.querySelector(".md-content").getBoundingClientRect();
  const codes = [...document.querySelectorAll(".highlight code")];
  const overflows = [];
  for (const element of article ? article.querySelectorAll("table, pre > code") : []) {
    if (!element.getClientRects().length) continue;  // in a closed fold
    let box = element;
    while (box !== article) {
      const clips = getComputedStyle(box).overflowX !== "visible";
      if (clips && box.scrollWidth > box.clientWidth + 1) break;
      box = box.parentElement;
    }
    const what = `${element.tagName.toLowerCase()} "${element.innerText.replace(/\\s+/g, " ").trim().slice(0, 60)}"`;
    if (box === article) {
      const r = element.getBoundingClientRect();
      if (r.left < column.left - 1 || r.right > column.right + 1) {
        overflows.push(`${what}: ${Math.round(r.width)} px wide, out of the column`);
      }
      continue;
    }
    const style = getComputedStyle(box);
    const cue = /auto|scroll/.test(style.overflowX) && style.backgroundImage.includes("gradient")
      && style.backgroundAttachment.includes("local");
    if (!cue) {
      overflows.push(`${what}: ${box.scrollWidth} px in a ${box.clientWidth} px box, no cue`);
    }
  }
  const images = article ? [...article.querySelectorAll("img")] : [];
  return {
    sideways: document.documentElement.scrollWidth - window.innerWidth,
    images_without_alt: images.filter((i) => !i.alt.trim()).map((i) => i.src),
    images_not_rendered: images.filter((i) => !i.complete || i.naturalWidth === 0).map((i) => i.src),
    nav: document.querySelectorAll("nav.md-nav--primary").length > 0,
    marker: /--8<--/.test(document.body.innerText),
    code_blocks: codes.filter((c) => c.innerText.trim()).length,
    highlighted: document.querySelectorAll(".highlight code span[class]").length,
    titled: document.querySelectorAll(".highlight .filename").length,
    footer: document.querySelectorAll(".md-footer__link").length,
    overflows: overflows,
  };
}"""


# Each wide table's first cell, after its wrapper scrolls sideways: where it went, if it left the
# wrapper's box (position: sticky in docs/stylesheets/course.css keeps it there).
STICKY_CHECK = """() => {
  const moved = [];
  for (const wrap of document.querySelectorAll(".md-typeset__scrollwrap")) {
    const cell = wrap.querySelector("td");
    if (!cell || wrap.scrollWidth <= wrap.clientWidth + 1) continue;
    wrap.scrollLeft = 120;
    const box = wrap.getBoundingClientRect(), left = cell.getBoundingClientRect().left;
    if (left < box.left - 1) moved.push(`${cell.innerText.slice(0, 30)}: ${Math.round(left)} px`);
    wrap.scrollLeft = 0;
  }
  return moved;
}"""


def source_pages(site: Path) -> dict[str, Path]:
    """The site's page for each source file (src/<path>/) -> the file."""
    pages = (str(p.relative_to(site).parent) for p in site.glob("src/**/index.html"))
    return {page: REPO / page.removeprefix("src/") for page in pages}


def test_every_source_page_shows_its_file_highlighted(site):
    # What the browser would check on each of the ~200 source pages, read from the HTML: they
    # come from one template, so the browser check below opens one page per language only.
    language = load_hooks().language
    for page, source in sorted(source_pages(site).items()):
        if not source.is_file():
            continue  # a folder's page: a list of its files
        built = (site / page / "index.html").read_text()
        assert "md-nav--primary" in built, f"{page}: no navigation"
        assert not SNIPPET_MARKER.search(built), f"{page} shows --8<--"
        code = re.search(r'<div class="[^"]*highlight[^"]*".*?<code>(.*?)</code>', built, re.S)
        assert code and page_text_of(code.group(1)).strip(), f"{page}: no code block with text"
        if language(str(source)) != "text":
            assert '<span class="' in code.group(1), f"{page}: the code is not highlighted"


def test_every_page_renders_in_chromium_with_its_code(site, served):
    """Every page at both widths, a laptop's and a phone's: loaded once at one width, checked,
    resized to the other and checked again (a resize lays the page out again, as a reload would,
    in a fraction of the time)."""
    executable = chromium()
    from playwright.sync_api import sync_playwright

    # Every page, except that of the source pages (one template, checked in the HTML above) it
    # opens the longest file of each language: a page takes Chromium about 0.4 s to lay out, and
    # the other 190 would add over a minute to `make test` and nothing the HTML check misses.
    language = load_hooks().language
    longest: dict[str, tuple[int, str]] = {}
    for page, source in source_pages(site).items():
        if source.is_file():
            key = language(str(source))
            size = (len(source.read_text(errors="replace")), page)
            longest[key] = max(longest.get(key, size), size)
    sampled = {page for _, page in longest.values()}
    pages = sorted(
        str(p.relative_to(site).parent)
        for p in site.rglob("index.html")
        if not str(p.relative_to(site)).startswith("src/")
        or str(p.relative_to(site).parent) in sampled
        or not (REPO / str(p.relative_to(site).parent).removeprefix("src/")).is_file()
    )
    chapters = {chapter.name for chapter in CHAPTERS}
    # The lesson pages that quote source files (a chapter's front page may quote none: chapter
    # 5's parts do): each must show its code highlighted, with the file's name as a title.
    quoting = {
        str(built_html(site, lesson).parent.relative_to(site))
        for lesson in LESSONS
        if TITLED_FENCE.search(lesson.read_text())
    }
    widths = sorted(VIEWPORTS, reverse=True)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        tab = browser.new_page(viewport=VIEWPORTS[widths[0]])
        tab.set_default_timeout(20_000)
        errors: list[str] = []
        overflowing: list[str] = []
        tab.on("pageerror", lambda error: errors.append(str(error)))
        # Every page would fetch the whole site's search index (half a megabyte) and index it, a
        # fifth of each page's time here. Search has its own test: here it gets the same index
        # with no pages in it.
        index = json.loads((site / "search" / "search_index.json").read_text())
        empty_index = json.dumps({**index, "docs": []})
        tab.route("**/search/search_index.json", lambda route: route.fulfill(body=empty_index))
        for path in pages:
            url = f"{served}/{'' if path == '.' else path + '/'}"
            # Loaded at the laptop's width, then narrowed to the phone's. (Not the other way: a
            # page loaded narrow and widened keeps some of its narrow layout, and scrolls.)
            tab.set_viewport_size(VIEWPORTS[widths[0]])
            response = tab.goto(url, wait_until="load")
            assert response is not None and response.status == 200, url
            for width in widths:
                if width != widths[0]:
                    tab.set_viewport_size(VIEWPORTS[width])
                at = f"{url} at {width} px"
                seen = tab.evaluate(PAGE_CHECK)
                assert seen["nav"], f"{at}: no navigation"
                if seen["sideways"] > 1:
                    overflowing.append(f"{at}: the page scrolls sideways by {seen['sideways']} px")
                assert seen["images_without_alt"] == [], f"{at}: images without alt text"
                assert seen["images_not_rendered"] == [], f"{at}: images that did not load"
                assert not seen["marker"], f"{at} shows --8<--"
                overflowing += [f"{at}: {what}" for what in seen["overflows"]]
                # A source page shows its file; a folder's page lists its files.
                source = REPO / path.removeprefix("src/")
                if path in quoting or (path.startswith("src/") and source.is_file()):
                    assert seen["code_blocks"], f"{at}: no code block with text"
                    # Pygments wraps each token in a <span class="...">: the code is highlighted.
                    if path in quoting or language(str(source)) != "text":
                        assert seen["highlighted"] > 0, at
                if path in quoting:
                    assert seen["titled"] > 0, f"{at}: no titled code"
                if path in chapters:
                    assert seen["footer"] > 0, f"{at}: no footer nav"
        assert errors == [], f"JavaScript errors: {errors}"
        assert overflowing == [], "wider than the column, with no scroll cue:\n" + "\n".join(
            overflowing
        )
        # What a reviewer looks at: the home page, a lesson at its results, a results page and
        # an exercise, each at each width.
        chapter3 = next(c.name for c in CHAPTERS if c.name.startswith("chapter3_"))
        shots = {
            "home": ("", "document.querySelector('#get-the-course')"),
            "lesson": (
                chapter3,
                "[...document.querySelectorAll('th')].find((th) => /sum_v0/.test(th.textContent))",
            ),
            "results": ("perf/h100/lstm_layer", "document.querySelector('.md-typeset table')"),
            "exercise": ("exercises/ch3_gelu", None),
        }
        for width in widths:
            tab.set_viewport_size(VIEWPORTS[width])
            # A table that scrolls keeps its first column in view: scrolled 120 px, the first
            # cell of each wide table on chapter 3's page stays where the table's box begins.
            tab.goto(f"{served}/{chapter3}/", wait_until="load")
            moved = tab.evaluate(STICKY_CHECK)
            assert moved == [], f"first cells that scroll out of view at {width} px: {moved}"
            for name, (path, table) in shots.items():
                tab.goto(f"{served}/{path + '/' if path else ''}", wait_until="load")
                if table:  # the table and the paragraphs that introduce it at the top
                    show_from(tab, table, before=2)
                tab.screenshot(path=str(SCREENSHOTS / f"{name}-{width}px.png"))
        browser.close()
    for name in shots:
        for width in widths:
            assert (SCREENSHOTS / f"{name}-{width}px.png").stat().st_size > 10_000, name


def show_from(tab, table: str, before: int) -> None:
    """Scroll so that the table (or other element) that `table` (JavaScript) finds, and the
    `before` paragraphs or headings that introduce it, are at the top of the window (the page's
    top if it finds none)."""
    tab.evaluate(
        f"""() => {{
        const cell = {table};
        let top = cell
          ? cell.closest(".md-typeset__scrollwrap") || cell.closest("table") || cell
          : null;
        for (let i = 0; top && i < {before}; i++) {{
          if (!/^(P|H[1-6])$/.test(top.previousElementSibling?.tagName)) break;
          top = top.previousElementSibling;
        }}
        if (top) window.scrollTo(0, top.getBoundingClientRect().top + window.scrollY - 70);
    }}"""
    )
    tab.wait_for_timeout(300)
