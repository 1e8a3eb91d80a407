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
- a table's header may break after an underscore (`<wbr>`), so long kernel names fit.
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
            plot = not match["bang"] and linked.endswith(IMAGE_SUFFIXES) and not anchor
            if plot and linked not in self.shown:
                self.shown.add(linked)
                self.plots.append((match["text"], new))
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
                chapter_page = relative(page_for(lesson), page)
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
    return files


# --- the measured results (docs/perf/) ---------------------------------------------------------

PERF_MACHINES = {
    "h100": ("H100", "the GPU machine (NVIDIA H100 80GB HBM3, 16 CPU cores)"),
    "cpu": ("CPU", "the course's CI machine (2 cores, no GPU)"),
}
# A page's title, by its file's name, and the script that wrote the file.
PERF_TITLES = {
    "call_cost_cpu": (
        "What one call of an op costs the host",
        "chapter5_extensions/benchmarks/call_cost.py",
    ),
    "call_cost_cuda": (
        "What one call of an op costs the host",
        "chapter5_extensions/benchmarks/call_cost.py",
    ),
    "chapter1_build_times": ("Chapter 1: build times", "chapter1_cpp_to_python/build_times.py"),
    "chapter1_crossing": (
        "Chapter 1: what a call from Python into C++ costs",
        "chapter1_cpp_to_python/benchmark.py",
    ),
    "chapter2_cpu": (
        "Chapter 2: one loop, and what more threads buy",
        "chapter2_tensor_api/benchmark.py",
    ),
    "chapter2_cpu_another_run": (
        "Chapter 2: another run of the CPU benchmark",
        "chapter2_tensor_api/benchmark.py",
    ),
    "chapter3_cuda": (
        "Chapter 3: fused_bias_relu and the sum, every version at every size",
        "chapter3_cuda_kernels/benchmark.py",
    ),
    "chapter3_layouts": (
        "Chapter 3: where 16-byte vectors do not fit",
        "chapter3_cuda_kernels/benchmark.py",
    ),
    "chapter3_cuda_after_narrow_headers": (
        "Chapter 3: the kernels after the narrow headers",
        "chapter3_cuda_kernels/benchmark.py",
    ),
    "gpu_check_narrow_headers": ("make gpu-check after the narrow headers", "tools/gpu_check.py"),
    "multi_gpu_two_h200": ("Chapter 5 on two GPUs", "chapter5_extensions/test_multi_gpu.py"),
    "chapter3_reduce_bank_conflicts": ("Chapter 3: bank conflicts of the sums v1 and v2", ""),
    "chapter3_ncu": (
        "Chapter 3: each kernel under Nsight Compute",
        "chapter3_cuda_kernels/ncu_summary.py",
    ),
    "chapter4_cuda": ("Chapter 4: forward and backward", "chapter4_autograd/benchmark.py"),
    "chapter4_cuda_earlier_run": (
        "Chapter 4: an earlier run of forward and backward",
        "chapter4_autograd/benchmark.py",
    ),
    "chapter4_training": (
        "Chapter 4: the same model trained two ways",
        "chapter4_autograd/train_demo.py",
    ),
    "chapter5_install": ("Chapter 5: installing the package, cold", ""),
    "chapter5_cuda": (
        "Chapter 5: every op of custom_ops",
        "chapter5_extensions/benchmarks/benchmark.py",
    ),
    "chapter5_cuda_before_lstm_cell_changes": (
        "Chapter 5: the ops before the LSTM cell's changes",
        "chapter5_extensions/benchmarks/benchmark.py",
    ),
    "chapter5_gpu_check": ("Chapter 5: its tests and sanitizers on the GPU", ""),
    "exercises": ("", "tools/check_exercise.py"),
    "gpu_check": ("", ""),
    "lstm_layer": (
        "Chapter 5: a whole LSTM layer",
        "chapter5_extensions/benchmarks/benchmark_lstm.py",
    ),
    "lstm_persistent": (
        "Chapter 5: the persistent LSTM kernel against the step loop",
        "chapter5_extensions/benchmarks/benchmark_lstm.py",
    ),
}


def perf_referrers(rel: str) -> list[tuple[str, str]]:
    """The lessons and docs pages that link to or include docs/perf/<rel>: (label, docs path)."""
    found = []
    for chapter in CHAPTERS:
        number = re.match(r"chapter(\d+)_", chapter).group(1)
        for lesson in lesson_files(chapter):
            if f"docs/perf/{rel}" in (REPO / lesson).read_text():
                name = "lesson" if lesson.endswith("README.md") else Path(lesson).stem
                found.append((f"chapter {number}'s {name}", page_for(lesson)))
    for doc in sorted((REPO / "docs").glob("*.md")):
        if f"perf/{rel}" in doc.read_text():
            found.append((f"the {doc.stem} page", doc.name))
    return found


def perf_page(markdown: str, src_uri: str) -> str:
    """A title (unless the file has one) and a line of context above a docs/perf/ file."""
    rel = src_uri.removeprefix("perf/")
    folder, _, name = rel.partition("/")
    stem = name.removesuffix(".md")
    if not name or folder not in PERF_MACHINES:
        return markdown  # perf/README.md: the folder's own introduction
    short, machine = PERF_MACHINES[folder]
    title, script = PERF_TITLES.get(stem, ("", ""))
    if not title:
        title = re.sub(r"^chapter(\d+)_", r"Chapter \1: ", stem).replace("_", " ")
        title = title[0].upper() + title[1:]
    what = f"What `{script}` printed" if script and (REPO / script).is_file() else "Measured"
    context = f"{what} on {machine}, kept as it was written."
    referrers = [f"[{label}]({relative(page, src_uri)})" for label, page in perf_referrers(rel)]
    if referrers:
        listed = ", ".join(referrers[:-1]) + " and " if len(referrers) > 1 else ""
        context += f" Quoted by {listed}{referrers[-1]}."
    lines = markdown.lstrip("\n").splitlines()
    if lines and lines[0].startswith("# "):
        return "\n".join([lines[0], "", context, "", *lines[1:]]) + "\n"
    return f"# {title} ({short})\n\n{context}\n\n{markdown}"


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


def on_page_markdown(markdown: str, page, config: MkDocsConfig, files: Files) -> str:
    src_uri = page.file.src_uri
    if src_uri.startswith("perf/") and src_uri.endswith(".md"):
        return perf_page(markdown, src_uri)
    if src_uri == "troubleshooting.md":
        return ERROR_INCLUDE.sub(error_capture, markdown)
    return markdown


TABLE_HEADER = re.compile(r"(<th\b[^>]*>)(.*?)(</th>)", flags=re.S)


def on_page_content(html: str, page, config: MkDocsConfig, files: Files) -> str:
    """A table header may break after an underscore: `sum_v5_vectorized_grid_stride` fits."""

    def breakable(match: re.Match) -> str:
        parts = re.split(r"(<[^>]+>)", match[2])
        text = "".join(p if p.startswith("<") else p.replace("_", "_<wbr>") for p in parts)
        return match[1] + text + match[3]

    return TABLE_HEADER.sub(breakable, html)


def on_serve(server, config: MkDocsConfig, builder) -> None:
    """`mkdocs serve` rebuilds when a lesson or a source file it quotes changes."""
    server.watch(str(REPO / "README.md"))
    for chapter in CHAPTERS:
        server.watch(str(REPO / chapter))
