"""MkDocs hook that makes the course website out of the lessons themselves (mkdocs.yml names it).

`make docs` serves the site at http://127.0.0.1:8000; `python -m mkdocs build --strict` writes it
to build/site (tests/test_docs.py builds it and opens it in a browser). Nothing is copied:

- the home page is the root README.md and each chapter page is its README.md, generated at build
  time, with their links rewritten to the site's pages;
- a code block fenced as ```cpp title="addone.cpp" (a verbatim excerpt, tests/test_repo.py checks
  it) becomes a pymdownx.snippets include of that file's line range, shown with the file's own
  line numbers: the code on the page is read from the file the tests run;
- a linked source file, notebook or folder gets a page of its own under src/;
- a GitHub alert (`> [!WARNING]` and its `> ` lines) becomes a Material admonition.
"""

from __future__ import annotations

import json
import posixpath
import re
import subprocess
from pathlib import Path, PurePosixPath

from markdown.extensions.toc import slugify
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files, InclusionLevel

REPO = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(p.name for p in REPO.glob("chapter*_*") if p.is_dir())

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
    if repo_path.startswith("docs/"):
        return repo_path.removeprefix("docs/")
    if (REPO / repo_path).is_dir():
        return f"src/{repo_path}/index.md"
    return f"src/{repo_path}.md"


def relative(target_page: str, from_page: str) -> str:
    return posixpath.relpath(target_page, posixpath.dirname(from_page) or ".")


class SiteBuilder:
    """Generates the pages for the lessons and for every repo file they link to."""

    def __init__(self) -> None:
        self.pages: dict[str, str] = {}  # docs path -> markdown
        self.wanted: list[str] = []  # repo paths that need a page

    def want(self, repo_path: str) -> None:
        if page_for(repo_path) not in self.pages and repo_path not in self.wanted:
            self.wanted.append(repo_path)

    def build(self) -> dict[str, str]:
        self.want("README.md")
        for chapter in CHAPTERS:
            self.want(f"{chapter}/README.md")
        self.pages["exercises.md"] = self.exercises_page("exercises.md")
        while self.wanted:
            repo_path = self.wanted.pop(0)
            page = page_for(repo_path)
            if page in self.pages or repo_path.startswith("docs/"):
                continue  # docs/ files are in docs_dir already
            path = REPO / repo_path
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
        lines = (REPO / repo_path).read_text().splitlines()
        out: list[str] = []
        i = 0
        while i < len(lines):
            line = lines[i]
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
        return "\n".join(out) + "\n"

    def code_block(self, repo_path: str, start: int, fence: re.Match, body: list[str]) -> list[str]:
        """A titled block becomes a snippet include of the lines it quotes; others stay as is."""
        indent, marker, lang, attrs = fence["indent"], fence["fence"], fence["lang"], fence["attrs"]
        title = TITLE.search(attrs)
        if not title:
            return [fence.group(0), *body, indent + marker]
        folder = posixpath.dirname(repo_path)
        source = posixpath.join(folder, title["title"]) if folder else title["title"]
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
        return [
            f'{indent}{marker}{lang} title="{title["title"]}" linenums="{first}"',
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
            return f"{match['bang']}[{match['text']}]({new})"

        return LINK.sub(rewrite, line)

    # --- the list of exercises -------------------------------------------------------------

    def exercises_page(self, page: str) -> str:
        """Every chapter's exercises, from the `### ` headings of its lesson's Exercises section,
        each linked to its statement, with the command that checks it and its files."""
        out = [
            "# Exercises",
            "",
            "Each chapter ends with exercises that grow in difficulty: a stub with `TODO`s to",
            "write, and a checker that builds your file and grades it, check by check (on a GPU,",
            "speed too). The statements and hints are in each lesson; click an exercise to read it.",
            "",
        ]
        for chapter in CHAPTERS:
            lesson = (REPO / chapter / "README.md").read_text()
            title = lesson.splitlines()[0].removeprefix("# ")
            chapter_page = relative(page_for(f"{chapter}/README.md"), page)
            out += [f"## [{title}]({chapter_page})", ""]
            section = lesson.split("\n## Exercises", 1)[1] if "\n## Exercises" in lesson else ""
            section = re.split(r"\n## ", section, maxsplit=1)[0]
            parts = re.split(r"^### (.+)$", section, flags=re.M)[1:]
            if not parts:
                out += ["No exercises yet.", ""]
            for heading, body in zip(parts[::2], parts[1::2], strict=True):
                anchor = slugify(heading, "-")
                command = re.search(r"`(make check EX=[\w/]+)`", body)
                files = sorted(set(re.findall(r"\]\((exercises/[\w.]+)\)", body)))
                links = []
                for f in files:
                    self.want(f"{chapter}/{f}")
                    links.append(f"[`{f}`]({relative(page_for(f'{chapter}/{f}'), page)})")
                line = f"- [{heading}]({chapter_page}#{anchor})"
                if command:
                    line += f": `{command.group(1)}`"
                if links:
                    line += " (" + ", ".join(links) + ")"
                out.append(line)
            out.append("")
        return "\n".join(out)

    # --- pages for linked files ---------------------------------------------------------------

    def heading(self, repo_path: str, page: str) -> list[str]:
        chapter = repo_path.split("/", 1)[0]
        lines = [f"# `{repo_path}`", ""]
        if chapter in CHAPTERS:
            lesson = relative(page_for(f"{chapter}/README.md"), page)
            lines += [f"From [the lesson of {chapter}]({lesson}).", ""]
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
        """A notebook's cells in order: markdown as text, code as Python blocks (no outputs)."""
        cells = json.loads((REPO / repo_path).read_text())["cells"]
        out = self.heading(repo_path, page)
        out += [
            "Run it: `.venv/bin/jupyter notebook " + repo_path + "` (outputs are not shown).",
            "",
        ]
        for cell in cells:
            source = "".join(cell["source"]).rstrip()
            if cell["cell_type"] == "markdown":
                # The notebook's own headings go one level down, under the page's title.
                source = re.sub(r"^(#+) ", r"#\1 ", source, flags=re.M)
                out += [self.rewrite_links(line, repo_path, page) for line in source.splitlines()]
            elif cell["cell_type"] == "code":
                fence = "`" * max([3, *(len(r) + 1 for r in re.findall(r"`{3,}", source))])
                out += [f"{fence}python", source, fence]
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


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for page, markdown in SiteBuilder().build().items():
        inclusion = (
            InclusionLevel.NOT_IN_NAV if page.startswith("src/") else InclusionLevel.UNDEFINED
        )
        if files.get_file_from_path(page) is not None:
            raise PluginError(f"docs/{page} exists, but the site generates that page")
        files.append(File.generated(config, page, content=markdown, inclusion=inclusion))
    return files


def on_serve(server, config: MkDocsConfig, builder) -> None:
    """`mkdocs serve` rebuilds when a lesson or a source file it quotes changes."""
    server.watch(str(REPO / "README.md"))
    for chapter in CHAPTERS:
        server.watch(str(REPO / chapter))
