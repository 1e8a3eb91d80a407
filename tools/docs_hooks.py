"""MkDocs hook that makes the course website out of the lessons themselves (mkdocs.yml names it).

`make docs` serves the site at http://127.0.0.1:8000; `python -m mkdocs build --strict` writes it
to build/site (tests/test_docs.py builds it and opens it in a browser). Nothing is copied:

- the home page is the root README.md and each chapter page is its README.md, generated at build
  time, with their links rewritten to the site's pages;
- a code block fenced as ```cpp title="addone.cpp" (a verbatim excerpt, tests/test_repo.py checks
  it) becomes a pymdownx.snippets include of that file's line range, shown with the file's own
  line numbers: the code on the page is read from the file the tests run;
- a linked source file, notebook or folder gets a page of its own under src/, left out of the
  site's search (a notebook's page is searched, ranked below the lessons);
- a GitHub alert (`> [!WARNING]` and its `> ` lines) becomes a Material admonition;
- a link to a plot (a .png) is followed by the plot itself, after the paragraph (or the table or
  code block the paragraph introduces), unless the lesson shows that plot already;
- a chapter page starts with a link that downloads its notebook (copied into the site);
- a page of docs/perf/ gets a title and a line of context (what wrote it, on which machine, and
  which pages quote it) above the file, which stays as its script wrote it;
- on the troubleshooting page, a long captured error shows its command and its last lines, and
  the whole capture, still included from docs/errors/, opens below them;
- a table's header may break after an underscore (`<wbr>`), so long kernel names fit;
- the home page says how to get the course: a zip of the repository, built with the site (so the
  site alone is enough to start), and a `git clone` where $COURSE_REPO_URL names the repository.
  Where it is published comes from the environment ($COURSE_SITE_URL, $COURSE_REPO_URL), never
  from a made-up address in mkdocs.yml.
"""

from __future__ import annotations

import io
import json
import os
import posixpath
import re
import subprocess
import sys
import zipfile
from pathlib import Path, PurePosixPath

from markdown.extensions.toc import slugify
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files, InclusionLevel

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tools/, beside this file
from notebook_outputs import outputs_markdown, text_of, where_it_ran

REPO = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(p.name for p in REPO.glob("chapter*_*") if p.is_dir())
# The course as one download on the site, and the folder it unpacks to.
ARCHIVE = "pytorch-extensions-course.zip"
ARCHIVE_FOLDER = "pytorch-extensions-course"


def published_at() -> tuple[str, str, str]:
    """(site URL, repository URL, branch) from the environment at build time; "" where unset."""
    site = os.environ.get("COURSE_SITE_URL", "").strip()
    repo = os.environ.get("COURSE_REPO_URL", "").strip().rstrip("/")
    return (
        (site.rstrip("/") + "/" if site else ""),
        repo,
        os.environ.get("COURSE_REPO_BRANCH", "main"),
    )


def course_files() -> list[str]:
    """The repository's files as a clone has them: what git tracks, or would (no build output,
    no .venv). Read from the working tree, so a site built from local edits ships those edits."""
    try:
        listed = (
            subprocess.run(
                ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                cwd=REPO,
                capture_output=True,
                check=True,
            )
            .stdout.decode()
            .split("\0")
        )
    except (OSError, subprocess.CalledProcessError):
        skip = (".git/", ".venv/", "build/")
        listed = [
            str(p.relative_to(REPO))
            for p in REPO.rglob("*")
            if not str(p.relative_to(REPO)).startswith(skip)
        ]
    return sorted(p for p in listed if p and (REPO / p).is_file() and "__pycache__" not in p)


def course_archive() -> bytes:
    """A zip of the course (ARCHIVE_FOLDER/...), with each file's mode, so that .ci/run and the
    scripts stay executable. A fixed date keeps the same files the same bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in course_files():
            info = zipfile.ZipInfo(f"{ARCHIVE_FOLDER}/{path}", date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = ((REPO / path).stat().st_mode & 0o777 | 0o100000) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, (REPO / path).read_bytes())
    return buffer.getvalue()


def built_from() -> str:
    """ " at commit 1a2b3c4" (" plus local changes" where the tree differs), or "" outside git."""
    try:
        commit = (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, check=True
            )
            .stdout.decode()
            .strip()
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO,
            capture_output=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""
    return f" at commit {commit}" + (" plus local changes" if dirty else "")


def get_the_course(size: int) -> list[str]:
    """The home page's section on getting the code, under the map of chapters."""
    _, repo, branch = published_at()
    made = built_from()
    lines = [
        "## Get the course",
        "",
        "The course is a folder of chapters you build and run on your own machine. Get the",
        "folder, then follow [Set up](#set-up) below from inside it:",
        "",
        f"- **Download it:** [{ARCHIVE}]({ARCHIVE}){{ download }} ({size / 2**20:.1f} MB: the "
        f"whole repository{made}, without its git history), then "
        f"`unzip {ARCHIVE} && cd {ARCHIVE_FOLDER}`.",
    ]
    if repo:
        repo = repo.removesuffix(".git")
        lines.append(
            f"- **Or clone it:** `git clone --branch {branch} {repo}.git && cd "
            f"{repo.rsplit('/', 1)[-1]}`"
            " (with its history, and `git pull` for updates)."
        )
    return [*lines, ""]


def lesson_files(chapter: str) -> list[str]:
    """A chapter's lesson pages, as repo paths: README.md, its parts (chapter 5's part1_*.md ...)
    and its optional pages in further/."""
    folder = REPO / chapter
    pages = sorted(p for p in folder.glob("*.md") if p.name != "README.md")
    pages += sorted(folder.glob("further/*.md"))
    return [f"{chapter}/README.md", *(str(p.relative_to(REPO)) for p in pages)]


FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,})(?P<lang>[\w+-]*)(?P<attrs>.*)$")
TITLE = re.compile(r'title="(?P<title>[^"]+)"')
ALERT = re.compile(r"^> \[!(?P<kind>NOTE|TIP|IMPORTANT|WARNING|CAUTION)\]\s*$")
# GitHub's five alert kinds and the Material admonition each becomes; a warning is a pitfall.
ADMONITIONS = {
    "NOTE": ("note", ""),
    "TIP": ("tip", ""),
    "IMPORTANT": ("info", ""),
    "WARNING": ("warning", ' "Pitfall"'),
    "CAUTION": ("danger", ""),
}
IMAGE_SUFFIXES = (".png", ".svg", ".jpg")
# A captured error (docs/errors/*.txt) that troubleshooting.md includes as a whole.
ERROR_INCLUDE = re.compile(
    r'^```text\n--8<-- "(?P<path>docs/errors/[\w.-]+\.txt)"\n```$', flags=re.M
)
LINK = re.compile(r"(?P<bang>!?)\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")
CODE_SPAN = re.compile(r"`+[^`]*`+")
LANGUAGES = {
    ".py": "python",
    ".cpp": "cpp",
    ".h": "cpp",
    ".cuh": "cuda",
    ".cu": "cuda",
    ".toml": "toml",
    ".json": "json",
    ".yml": "yaml",
    ".yaml": "yaml",
    ".sh": "bash",
    ".txt": "text",
}


def language(repo_path: str) -> str:
    """The Pygments lexer for a file; a template (`op.cu.in`) is highlighted as what it makes."""
    suffixes = PurePosixPath(repo_path).suffixes
    if len(suffixes) > 1 and suffixes[-1] == ".in":
        suffixes.pop()
    return LANGUAGES.get(suffixes[-1] if suffixes else "", "text")


def page_for(repo_path: str) -> str:
    """The docs page (a path inside docs_dir) that stands for a file or folder of the repo."""
    if repo_path == "README.md":
        return "index.md"
    chapter, _, rest = repo_path.partition("/")
    if chapter in CHAPTERS and rest == "README.md":
        return f"{chapter}/index.md"
    if chapter in CHAPTERS and repo_path in lesson_files(chapter):
        return repo_path  # a part or an optional page: a page beside the chapter's
    if repo_path.startswith("docs/"):
        return repo_path.removeprefix("docs/")
    if (REPO / repo_path).is_dir():
        return f"src/{repo_path}/index.md"
    return f"src/{repo_path}.md"


def relative(target_page: str, from_page: str) -> str:
    return posixpath.relpath(target_page, posixpath.dirname(from_page) or ".")


def exercise_statements(lesson: str) -> list[tuple[str, str]]:
    """The `### ` headings under a lesson's `## Exercises` and the text below each."""
    section = lesson.split("\n## Exercises", 1)[1] if "\n## Exercises" in lesson else ""
    section = re.split(r"\n## ", section, maxsplit=1)[0]
    parts = re.split(r"^### (.+)$", section, flags=re.M)[1:]
    return list(zip(parts[::2], parts[1::2], strict=True))


class SiteBuilder:
    """Generates the pages for the lessons and for every repo file they link to."""

    def __init__(self) -> None:
        self.pages: dict[str, str] = {}  # docs path -> markdown
        self.wanted: list[str] = []  # repo paths that need a page
        self.downloads: dict[str, str] = {}  # docs path -> repo path of a file copied as is
        self.plots: list[tuple[str, str]] = []  # (text, target): plots linked, not yet shown
        self.shown: set[str] = set()  # the repo paths of the plots the current lesson shows
        self.archive = b""  # the course as a zip (ARCHIVE), made with the home page
        self.sources: dict[str, str] = {}  # docs path -> the repo path it was generated from
        self.images: dict[str, bytes] = {}  # docs path -> an image a notebook cell made

    def want(self, repo_path: str) -> None:
        if page_for(repo_path) not in self.pages and repo_path not in self.wanted:
            self.wanted.append(repo_path)

    def build(self) -> dict[str, str]:
        self.want("README.md")
        for chapter in CHAPTERS:
            for lesson in lesson_files(chapter):
                self.want(lesson)
        self.pages["exercises.md"] = self.exercises_page("exercises.md")
        while self.wanted:
            repo_path = self.wanted.pop(0)
            page = page_for(repo_path)
            if page in self.pages or repo_path.startswith("docs/"):
                continue  # docs/ files are in docs_dir already
            path = REPO / repo_path
            self.sources[page] = repo_path
            if path.is_dir():
                self.pages[page] = self.folder_page(repo_path, page)
            elif path.suffix == ".md":
                self.pages[page] = self.lesson_page(repo_path, page)
            elif path.suffix == ".ipynb":
                self.pages[page] = self.notebook_page(repo_path, page)
            else:
                self.pages[page] = self.source_page(repo_path, page)
        return self.pages

    # --- a lesson (any README.md) ------------------------------------------------------------

    def lesson_page(self, repo_path: str, page: str) -> str:
        text = (REPO / repo_path).read_text()
        lines = text.splitlines()
        folder = posixpath.dirname(repo_path)
        # The images the lesson shows itself: a link to one of them adds no second copy.
        self.shown = {
            posixpath.normpath(posixpath.join(folder, m["target"].partition("#")[0]))
            for m in LINK.finditer(text)
            if m["bang"]
        }
        self.plots = []
        out: list[str] = []
        i = 0
        while i < len(lines):
            line = lines[i]
            if i == 1:
                out += self.notebook_download(repo_path, page)
            if repo_path == "README.md" and line.startswith("## Prerequisites"):
                self.archive = course_archive()
                out += get_the_course(len(self.archive))
            if not line.strip() and self.plots:
                previous = next((o for o in reversed(out) if o.strip()), "")
                if not previous.rstrip().endswith(":"):  # else after what the colon announces
                    out += ["", *self.plot_images(previous)]
            fence = FENCE_OPEN.match(line)
            if fence:
                end = i + 1
                closing = fence["indent"] + fence["fence"]
                while end < len(lines) and lines[end].rstrip() != closing:
                    end += 1
                if end == len(lines):
                    raise PluginError(f"{repo_path}:{i + 1}: a code fence is never closed")
                out += self.code_block(repo_path, i, fence, lines[i + 1 : end])
                i = end + 1
                continue
            alert = ALERT.match(line)
            if alert:
                kind, title = ADMONITIONS[alert["kind"]]
                out.append(f"!!! {kind}{title}")
                out.append("")
                i += 1
                while i < len(lines) and lines[i].startswith(">"):
                    body = lines[i].removeprefix(">").removeprefix(" ")
                    out.append(f"    {self.rewrite_links(body, repo_path, page)}" if body else "")
                    i += 1
                continue
            out.append(self.rewrite_links(line, repo_path, page))
            i += 1
        if self.plots:
            out += ["", *self.plot_images("")]
        return "\n".join(out) + "\n"

    def plot_images(self, previous: str) -> list[str]:
        """The plots linked since the last ones shown, each an image that links to itself."""
        indent = re.match(r"[ \t]*(?:[-*] |\d+\. )?", previous).group(0)
        indent = " " * len(indent)
        images = []
        for text, target in self.plots:
            alt = "Plot: " + text.replace("`", "")
            images += [f"{indent}[![{alt}]({target})]({target})", ""]
        self.plots = []
        return images

    def notebook_download(self, repo_path: str, page: str) -> list[str]:
        """Under a chapter's title: a button that downloads its notebook, and where to read it."""
        chapter, _, rest = repo_path.partition("/")
        if chapter not in CHAPTERS or rest != "README.md":
            return []
        out = []
        for notebook in sorted((REPO / chapter).glob("*.ipynb")):
            source = f"{chapter}/{notebook.name}"
            self.downloads[posixpath.join(posixpath.dirname(page), notebook.name)] = source
            self.want(source)
            read = relative(page_for(source), page)
            out += [
                "",
                f"[Download the notebook `{notebook.name}`]({notebook.name})"
                f'{{ .md-button download="{notebook.name}" }} The experiments that follow this '
                f"lesson: open it in Jupyter from the chapter's folder, or [read it here]({read}).",
                "{ .course-notebook }",
            ]
        return out

    def code_block(self, repo_path: str, start: int, fence: re.Match, body: list[str]) -> list[str]:
        """A titled block becomes a snippet include of the lines it quotes; others stay as is."""
        indent, marker, lang, attrs = fence["indent"], fence["fence"], fence["lang"], fence["attrs"]
        title = TITLE.search(attrs)
        if not title:
            return [fence.group(0), *body, indent + marker]
        folder = posixpath.dirname(repo_path)
        source = posixpath.normpath(posixpath.join(folder, title["title"]))
        if not (REPO / source).is_file():
            raise PluginError(f"{repo_path}:{start + 1}: quotes {source}, which does not exist")
        quoted = "".join(line.removeprefix(indent) + "\n" for line in body)
        text = (REPO / source).read_text()
        at = 0 if text.startswith(quoted) else text.find("\n" + quoted) + 1
        if not quoted or (at == 0 and not text.startswith(quoted)):
            raise PluginError(
                f"{repo_path}:{start + 1}: the block titled {title['title']!r} is not a run of "
                f"whole lines of {source}; quote the file line for line"
            )
        first = text.count("\n", 0, at) + 1
        last = first + len(body) - 1
        # The title names the lines; on_page_content makes it a link to them on the file's page.
        return [
            f'{indent}{marker}{lang} title="{title["title"]} (lines {first}-{last})" '
            f'linenums="{first}"',
            f'{indent}--8<-- "{source}:{first}:{last}"',
            indent + marker,
        ]

    def rewrite_links(self, line: str, repo_path: str, page: str) -> str:
        """Point a README's relative links at the site's pages; leave code spans alone."""
        spans = [m.span() for m in CODE_SPAN.finditer(line)]

        def rewrite(match: re.Match) -> str:
            if any(a <= match.start() < b for a, b in spans):
                return match.group(0)
            target, _, anchor = match["target"].partition("#")
            if not target or re.match(r"^[a-z]+:", target):
                return match.group(0)  # an anchor on this page, or an absolute URL
            folder = posixpath.dirname(repo_path)
            linked = posixpath.normpath(posixpath.join(folder, target))
            if linked.startswith("..") or not (REPO / linked).exists():
                return match.group(0)  # left for --strict to report
            self.want(linked)
            new = relative(page_for(linked), page) + (f"#{anchor}" if anchor else "")
            plot = not match["bang"] and linked.endswith(IMAGE_SUFFIXES) and not anchor
            if plot and linked not in self.shown:
                self.shown.add(linked)
                self.plots.append((match["text"], new))
            return f"{match['bang']}[{match['text']}]({new})"

        return LINK.sub(rewrite, line)

    # --- the list of exercises -------------------------------------------------------------

    def exercises_page(self, page: str) -> str:
        """Every chapter's exercises, from the `### ` headings of its lesson's Exercises section,
        each linked to a page of its own (exercise_page) with the command that checks it."""
        out = [
            "# Exercises",
            "",
            "Each chapter ends with exercises that grow in difficulty: a stub with `TODO`s to",
            "write, and a checker that builds your file and grades it, check by check (on a GPU,",
            "speed too). Each page below has the statement, the command that grades it, what a",
            "pass needs, and the reference solution in a fold: try first.",
            "",
        ]
        for chapter in CHAPTERS:
            title = (REPO / chapter / "README.md").read_text().splitlines()[0].removeprefix("# ")
            out += [f"## [{title}]({relative(page_for(f'{chapter}/README.md'), page)})", ""]
            found = [
                (lesson, heading, body)
                for lesson in lesson_files(chapter)
                for heading, body in exercise_statements((REPO / lesson).read_text())
            ]
            if not found:
                out += ["No exercises yet.", ""]
            for lesson, heading, body in found:
                command = re.search(r"`(make check EX=(ch\d+)/(\w+))`", body)
                if not command:
                    anchor = slugify(heading, "-")
                    out.append(f"- [{heading}]({relative(page_for(lesson), page)}#{anchor})")
                    continue
                exercise_page = f"exercises/{command[2]}_{command[3]}.md"
                self.sources[exercise_page] = lesson  # its statement, which an edit changes
                self.pages[exercise_page] = self.exercise_page(
                    chapter, lesson, heading, body, command[1], exercise_page
                )
                out.append(f"- [{heading}]({relative(exercise_page, page)}): `{command[1]}`")
            out.append("")
        return "\n".join(out)

    def exercise_page(
        self, chapter: str, lesson: str, heading: str, body: str, command: str, page: str
    ) -> str:
        """One exercise: its statement (from the lesson), how to grade it and what a pass needs
        (the check file's docstring), the files, and the reference solution folded away."""
        number = re.match(r"chapter(\d+)_", chapter).group(1)
        name = command.rsplit("/", 1)[1]
        check = f"{chapter}/exercises/check_{name}.py"
        check_text = (REPO / check).read_text()
        source = re.search(r'^SOURCE = "([^"]+)"', check_text, flags=re.M)[1]
        stub = f"{chapter}/exercises/{source}"
        solution = f"solutions/{chapter}/{source}"
        lesson_title = (REPO / lesson).read_text().splitlines()[0].removeprefix("# ")
        anchor = slugify(heading, "-")
        # The statement, up to its command (which has its own section below); what follows the
        # last exercise's command is about the lesson's exercises in general.
        text = body.strip().split(f"`{command}`", 1)[0].rstrip()
        statement = [self.rewrite_links(line, lesson, page) for line in text.splitlines()]
        numbered = re.match(r"(\d+)\. (.+)", heading)
        title = f"exercise {numbered[1]}: {numbered[2]}" if numbered else heading
        # The docstring's paragraphs after its `make check` line: what the checks demand.
        doc = check_text.split('"""')[1]
        demands = doc.split(command, 1)[-1].strip()
        for path in (stub, check):
            self.want(path)
        out = [
            f"# Chapter {number}, {title}",
            "",
            f"From [{lesson_title}]({relative(page_for(lesson), page)}#{anchor}), where the ideas"
            " it practises are explained. Work in your copy of the course (the home page says how"
            " to get it).",
            "",
            "## The task",
            "",
            *statement,
            "",
            "## Grade it",
            "",
            "From the course's folder, after `make tutorial`:",
            "",
            "```",
            command,
            "```",
            "",
            "It builds your file and runs each check, printing PASS or FAIL with what was expected"
            " and what came; exit status 0 is a pass (3: not graded here, a CUDA exercise on a"
            " machine without a GPU).",
            "",
        ]
        if demands:
            out += ["What a pass needs, from the checks:", "", *demands.splitlines(), ""]
        out += [
            f"Your file: [`{source}`]({relative(page_for(stub), page)}); the checks, which are"
            f" the specification: [`check_{name}.py`]({relative(page_for(check), page)}).",
            "",
        ]
        # The files built with yours (GIVEN) and the header between them, which you read, not edit.
        listed = re.search(r"^GIVEN = \[(.*)\]", check_text, flags=re.M)
        given = re.findall(r'"([^"]+)"', listed[1]) if listed else []
        header = f"{Path(source).stem}.h"
        if (REPO / chapter / "exercises" / header).is_file():
            given.append(header)
        if given:
            for name_given in given:
                self.want(f"{chapter}/exercises/{name_given}")
            links = ", ".join(
                f"[`{g}`]({relative(page_for(f'{chapter}/exercises/{g}'), page)})" for g in given
            )
            out += [f"Given, to read but not to edit: {links}.", ""]
        if (REPO / solution).is_file():
            out += [
                "## The reference solution",
                "",
                '??? success "Show the reference solution (try first)"',
                "",
                f'    ```{language(solution)} title="{solution}" linenums="1"',
                f'    --8<-- "{solution}"',
                "    ```",
                "",
            ]
        return "\n".join(out)

    # --- pages for linked files ---------------------------------------------------------------

    def heading(self, repo_path: str, page: str) -> list[str]:
        chapter = repo_path.split("/", 1)[0]
        lines = [f"# `{repo_path}`", ""]
        if chapter in CHAPTERS:
            readme = f"{chapter}/README.md"
            title = (REPO / readme).read_text().splitlines()[0].removeprefix("# ")
            lines += [f"A file of [{title}]({relative(page_for(readme), page)}).", ""]
        return lines

    def source_page(self, repo_path: str, page: str) -> str:
        lang = language(repo_path)
        return "\n".join(
            [
                *self.heading(repo_path, page),
                f'```{lang} title="{repo_path}" linenums="1"',
                f'--8<-- "{repo_path}"',
                "```",
                "",
            ]
        )

    def notebook_page(self, repo_path: str, page: str) -> str:
        """A notebook's cells in order: markdown as text, code as Python blocks, each followed by
        what it printed when tools/execute_notebooks.py ran it (docs/notebooks/, from the CPU
        machine), with its run time. A copy whose code differs from the notebook's is not used."""
        cells = json.loads((REPO / repo_path).read_text())["cells"]
        executed_path = REPO / "docs" / "notebooks" / PurePosixPath(repo_path).name
        executed = json.loads(executed_path.read_text()) if executed_path.is_file() else None
        runs = [c for c in executed["cells"] if c["cell_type"] == "code"] if executed else []
        codes = [c for c in cells if c["cell_type"] == "code"]
        if [text_of(c["source"]) for c in runs] != [text_of(c["source"]) for c in codes]:
            runs = []  # stale: tests/test_executed_notebooks.py fails and says how to refresh
        out = self.heading(repo_path, page)
        run_it = f"Run it yourself: `.venv/bin/jupyter notebook {repo_path}`."
        if runs:
            out += [f"{where_it_ran(executed)} Under each cell, what it printed. {run_it}", ""]
        else:
            out += [f"{run_it} (No executed copy to show outputs from.)", ""]
        stem = PurePosixPath(repo_path).stem
        folder = posixpath.dirname(page)
        code_index = 0
        for cell in cells:
            source = "".join(cell["source"]).rstrip()
            if cell["cell_type"] == "markdown":
                # The notebook's own headings go one level down, under the page's title.
                source = re.sub(r"^(#+) ", r"#\1 ", source, flags=re.M)
                out += [self.rewrite_links(line, repo_path, page) for line in source.splitlines()]
            elif cell["cell_type"] == "code":
                fence = "`" * max([3, *(len(r) + 1 for r in re.findall(r"`{3,}", source))])
                out += [f"{fence}python", source, fence]
                if runs:
                    shown, images = outputs_markdown(runs[code_index], f"{stem}-{code_index + 1}")
                    # Its own look (course.css), so that an output never reads as more code.
                    shown = [re.sub(r"^(`{3,})text$", r"\1{ .text .course-output }", line)
                             for line in shown]  # fmt: skip
                    out += ["", *shown] if shown else []
                    for name, data in images.items():
                        self.images[posixpath.join(folder, name)] = data
                code_index += 1
            out.append("")
        return "\n".join(out)

    def folder_page(self, repo_path: str, page: str) -> str:
        out = self.heading(repo_path, page)
        for name in self.folder_files(repo_path):
            linked = f"{repo_path}/{name}"
            self.want(linked)
            out.append(f"- [`{name}`]({relative(page_for(linked), page)})")
        return "\n".join([*out, ""])

    @staticmethod
    def folder_files(repo_path: str) -> list[str]:
        """The folder's files that git tracks or would track (no build output), as paths in it."""
        try:
            listed = subprocess.run(
                ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", repo_path],
                cwd=REPO,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
        except (OSError, subprocess.CalledProcessError):
            listed = [str(p.relative_to(REPO)) for p in (REPO / repo_path).rglob("*")]
        return sorted(
            {
                posixpath.relpath(p, repo_path)
                for p in listed
                if (REPO / p).is_file() and "__pycache__" not in p
            }
        )


# A source file's page holds the file and nothing else: searching the site for `TORCH_LIBRARY`
# should find the lessons that explain it, not the hundred files that use it. A notebook's page
# is prose and code, like a lesson: searched, but ranked below the lessons.
SEARCH_EXCLUDED = "---\nsearch:\n  exclude: true\n---\n"
SEARCH_BELOW_LESSONS = "---\nsearch:\n  boost: 0.5\n---\n"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    builder = SiteBuilder()
    for page, markdown in builder.build().items():
        inclusion = InclusionLevel.UNDEFINED
        if page.startswith("src/"):
            inclusion = InclusionLevel.NOT_IN_NAV
            notebook = page.endswith(".ipynb.md")
            markdown = (SEARCH_BELOW_LESSONS if notebook else SEARCH_EXCLUDED) + markdown
        if files.get_file_from_path(page) is not None:
            raise PluginError(f"docs/{page} exists, but the site generates that page")
        files.append(File.generated(config, page, content=markdown, inclusion=inclusion))
    for path, repo_path in builder.downloads.items():
        files.append(File.generated(config, path, abs_src_path=str(REPO / repo_path)))
    for path, data in builder.images.items():
        files.append(File.generated(config, path, content=data))
    files.append(File.generated(config, ARCHIVE, content=builder.archive))
    SOURCES.clear()
    SOURCES.update(builder.sources)
    return files


# docs path -> repo path of each generated page, for its edit link (on_page_context).
SOURCES: dict[str, str] = {}


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Where the site is published, from the environment (mkdocs.yml's header says which); the
    results pages' section of the navigation, from their index."""
    for entry in config.nav:
        if isinstance(entry, dict) and entry.get("Results") == "perf/README.md":
            entry["Results"] = perf_nav()
        if isinstance(entry, dict) and entry.get("Exercises") == "exercises.md":
            entry["Exercises"] = exercise_nav()
    site, repo, branch = published_at()
    config.site_url = site or None
    if repo:
        config.repo_url = repo
        config.edit_uri = f"edit/{branch}/docs/"
    return config


def on_page_context(context, page, config: MkDocsConfig, nav):
    """A generated page's edit link opens the file it was made from, not a page under docs/."""
    _, repo, branch = published_at()
    if repo:
        source = SOURCES.get(page.file.src_uri, f"docs/{page.file.src_uri}")
        kind = "tree" if (REPO / source).is_dir() else "edit"
        page.edit_url = f"{repo.removesuffix('.git')}/{kind}/{branch}/{source}"
        if not (REPO / source).exists():  # a page made of several files: the exercises' list
            page.edit_url = None
    return context


def on_post_build(config: MkDocsConfig) -> None:
    """Without a site URL the sitemap would be empty: leave it out."""
    if not config.site_url:
        for name in ("sitemap.xml", "sitemap.xml.gz"):
            (Path(config.site_dir) / name).unlink(missing_ok=True)


# --- the measured results (docs/perf/) ---------------------------------------------------------

PERF_INDEX = REPO / "docs" / "perf" / "README.md"
PERF_ROW = re.compile(
    r"^\| \[(?P<title>[^\]]+)\]\((?P<path>[\w./-]+\.md)\) \| (?P<what>.+?) \| (?P<by>.+) \|$"
)


def perf_index() -> dict[str, list[dict[str, str]]]:
    """docs/perf/README.md's tables, by their `## ` group: one row per results page, with its
    title, one line on what it shows and what wrote it. The site takes each page's title, its
    context line and its place in the navigation from here, so the index cannot leave one out."""
    groups: dict[str, list[dict[str, str]]] = {}
    group = ""
    for line in PERF_INDEX.read_text().splitlines():
        if line.startswith("## "):
            group = line.removeprefix("## ").strip()
        elif row := PERF_ROW.match(line):
            groups.setdefault(group, []).append(row.groupdict())
    return groups


def exercise_nav() -> list:
    """The navigation's Exercises section: the list, then each chapter's exercise pages."""
    entries: list = ["exercises.md"]
    for chapter in CHAPTERS:
        number = re.match(r"chapter(\d+)_", chapter).group(1)
        pages = [
            {heading: f"exercises/{command[1]}_{command[2]}.md"}
            for lesson in lesson_files(chapter)
            for heading, body in exercise_statements((REPO / lesson).read_text())
            if (command := re.search(r"`make check EX=(ch\d+)/(\w+)`", body))
        ]
        if pages:
            entries.append({f"Chapter {number}": pages})
    return entries


def perf_nav() -> list:
    """The navigation's Results section: the index, then each group's pages in its order."""
    entries: list = ["perf/README.md"]
    for group, rows in perf_index().items():
        short = group.split(":")[0] + (":" + group.split(":")[1] if "Chapter 5" in group else "")
        entries.append({short: [{row["title"]: f"perf/{row['path']}"} for row in rows]})
    return entries


def perf_referrers(rel: str) -> list[tuple[str, str]]:
    """The lessons and docs pages that link to or include docs/perf/<rel>: (label, docs path)."""
    found = []
    for chapter in CHAPTERS:
        number = re.match(r"chapter(\d+)_", chapter).group(1)
        for lesson in lesson_files(chapter):
            text = (REPO / lesson).read_text()
            if f"docs/perf/{rel}" in text:
                title = text.splitlines()[0].removeprefix("# ").replace("`", "")
                label = title if title.startswith("Chapter") else f"Chapter {number}: {title}"
                found.append((label, page_for(lesson)))
    for doc in sorted((REPO / "docs").glob("*.md")):
        if f"perf/{rel}" in doc.read_text():
            found.append((f"the {doc.stem} page", doc.name))
    return found


def perf_page(markdown: str, src_uri: str) -> str:
    """The index's title and line of context (what it shows, what wrote it, which lessons quote
    it) above a docs/perf/ file, which stays as its script wrote it; then its plot, if any."""
    rel = src_uri.removeprefix("perf/")
    if "/" not in rel:
        return markdown  # perf/README.md: the index itself
    row = next((r for rows in perf_index().values() for r in rows if r["path"] == rel), None)
    if row is None:
        raise PluginError(f"docs/perf/{rel} is not listed in docs/perf/README.md: add a row")
    context = f"{row['what']} Written by {row['by']}; kept as it was written."
    referrers = [f"[{label}]({relative(page, src_uri)})" for label, page in perf_referrers(rel)]
    if referrers:
        listed = ", ".join(referrers[:-1]) + " and " if len(referrers) > 1 else ""
        context += f" Quoted by {listed}{referrers[-1]}."
    lines = markdown.lstrip("\n").splitlines()
    if lines and lines[0].startswith("# "):  # the file's own title: kept, under the index's
        lines[0] = f"**{lines[0].removeprefix('# ').strip()}**"
    plot = REPO / "docs" / src_uri.removesuffix(".md")
    shown = []
    if plot.with_suffix(".png").is_file() and f"{plot.name}.png" not in markdown:
        name = f"{plot.name}.png"
        shown = [f"[![Plot: {row['title']}]({name})]({name})", ""]
    return "\n".join([f"# {row['title']}", "", context, "", *shown, *lines]) + "\n"


# --- the troubleshooting page: captured errors -------------------------------------------------

SUMMARY_TAIL = 3  # the lines shown before a failed run's exit status
# The line that names the exception (`RuntimeError: ...`), which may sit above pip's epilogue.
ERROR_LINE = re.compile(r"^\s*(?:\w+\.)*\w*(?:Error|Exception|Interrupt)\b")


def error_capture(match: re.Match) -> str:
    """A captured error as its commands and last lines, with the whole capture in a fold.

    A capture is `# ` header lines, then runs: a `$ command` line and what it printed, which ends
    in a `[exit status ...]` line. A run that printed a traceback or a failed build of more than
    a few lines shows its command, the line that names the exception, its last lines and markers
    for the lines cut; the fold holds every line. Both are pymdownx.snippets includes of the file
    (by line range): the page holds no copy of the capture.
    """
    path = match["path"]
    lines = (REPO / path).read_text().splitlines()
    whole = f'```text\n--8<-- "{path}"\n```'

    def include(first: int, last: int) -> str:  # file lines, from 1
        return f'--8<-- "{path}:{first}:{last}"'

    starts = [n for n, line in enumerate(lines) if line.startswith("$ ")]
    shown: list[str] = []
    folded = False
    for start, end in zip(starts, [*starts[1:], len(lines)], strict=True):
        while end > start + 1 and not lines[end - 1].strip():
            end -= 1
        printed = lines[start + 1 : end]
        failed = any(line.strip().startswith(("Traceback", "FAILED")) for line in printed)
        if shown:
            shown.append("")
        command = start + 1  # the file line of `$ ...`; printed[j] is line command + 1 + j
        if not failed or len(printed) <= SUMMARY_TAIL + 3:
            shown.append(include(command, end))
            continue
        folded = True
        named = [command + 1 + j for j, line in enumerate(printed) if ERROR_LINE.match(line)]
        kept = sorted(
            [(command, command), *[(n, n) for n in named[-1:]], (end - SUMMARY_TAIL, end)]
        )
        merged = [kept[0]]
        for first, last in kept[1:]:
            if first <= merged[-1][1] + 2:  # no marker for a cut of one line or none
                merged[-1] = (merged[-1][0], max(last, merged[-1][1]))
            else:
                merged.append((first, last))
        for n, (first, last) in enumerate(merged):
            if n:
                cut = first - merged[n - 1][1] - 1
                note = " (the whole capture is below)" if n == 1 else ""
                shown.append(f"[... {cut} lines{note} ...]")
            shown.append(include(first, last))
    if not folded:
        return whole
    fold = "\n".join("    " + line for line in whole.splitlines())
    return (
        "```{ .text .wrap }\n" + "\n".join(shown) + "\n```\n\n"
        f'??? quote "Everything it printed ({len(lines)} lines), and where and how it was '
        f'captured"\n\n{fold}'
    )


# Search finds the lessons first: a learner who types "cuDNN" wants the lesson that explains it,
# not a results table that names it 40 times (its snippet a wall of table cells). The results
# pages are left out of the index (even boosted down to 0.01, a title match ranked them first):
# the results index and each lesson's links lead to them. The home page and the lists of
# exercises and results rank below the lessons, and a chapter's optional pages (further/) below
# its main path (Material multiplies a page's score by its boost).
SEARCH_BOOSTS = {"index.md": 0.3, "exercises.md": 0.5, "performance.md": 0.5}
FURTHER_BOOST = 0.7


def on_page_markdown(markdown: str, page, config: MkDocsConfig, files: Files) -> str:
    src_uri = page.file.src_uri
    search = page.meta.setdefault("search", {})
    if src_uri.startswith("perf/"):
        search.setdefault("exclude", True)
    elif src_uri in SEARCH_BOOSTS:
        search.setdefault("boost", SEARCH_BOOSTS[src_uri])
    elif "/further/" in src_uri:
        search.setdefault("boost", FURTHER_BOOST)
    if src_uri.startswith("perf/") and src_uri.endswith(".md"):
        return perf_page(markdown, src_uri)
    if src_uri == "troubleshooting.md":
        return ERROR_INCLUDE.sub(error_capture, markdown)
    return markdown


TABLE_HEADER = re.compile(r"(<th\b[^>]*>)(.*?)(</th>)", flags=re.S)
# Code in a table's first cells (each row's name): a phone may wrap it after an underscore.
FIRST_CELL_CODE = re.compile(r"(<tr>\s*<td[^>]*>)(.*?)(</td>)", flags=re.S)
EXCERPT_TITLE = re.compile(r'<span class="filename">([^<]+?) \(lines (\d+)-(\d+)\)</span>')


def on_page_content(html: str, page, config: MkDocsConfig, files: Files) -> str:
    """A table header may break after an underscore: `sum_v5_vectorized_grid_stride` fits. An
    excerpt's title, `csrc/relu.cpp (lines 12-30)`, links to those lines on the file's page."""

    def breakable(match: re.Match) -> str:
        parts = re.split(r"(<[^>]+>)", match[2])
        text = "".join(p if p.startswith("<") else p.replace("_", "_<wbr>") for p in parts)
        return match[1] + text + match[3]

    lesson = SOURCES.get(page.file.src_uri)

    def linked(match: re.Match) -> str:
        name, first, last = match[1], match[2], match[3]
        source = posixpath.normpath(posixpath.join(posixpath.dirname(lesson or ""), name))
        target = files.get_file_from_path(page_for(source)) if lesson else None
        if target is None:
            return match[0]
        href = f"{target.url_relative_to(page.file)}#__codelineno-0-{first}"
        return (
            f'<span class="filename"><a href="{href}" title="{name} on its own page">{name}</a>'
            f" (lines {first}-{last})</span>"
        )

    def first_cell(match: re.Match) -> str:
        cell = re.sub(
            r"<code>(.*?)</code>",
            lambda code: (
                code[0] if "<" in code[1] else f"<code>{code[1].replace('_', '_<wbr>')}</code>"
            ),
            match[2],
        )
        return match[1] + cell + match[3]

    html = FIRST_CELL_CODE.sub(
        first_cell, TABLE_HEADER.sub(breakable, EXCERPT_TITLE.sub(linked, html))
    )
    if page.file.src_uri == "troubleshooting.md":  # a whole capture: in its fold, not in search
        html = html.replace(
            '<details class="quote">', '<details class="quote" data-search-exclude>'
        )
    return html


def on_serve(server, config: MkDocsConfig, builder) -> None:
    """`mkdocs serve` rebuilds when a lesson or a source file it quotes changes."""
    server.watch(str(REPO / "README.md"))
    for chapter in CHAPTERS:
        server.watch(str(REPO / chapter))
