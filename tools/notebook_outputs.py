"""What an executed notebook's cells printed, as Markdown for the course website (MkDocs Material).

Pure functions on the notebook's JSON (no torch, no kernel): tools/execute_notebooks.py writes the
executed copies to docs/notebooks/, and the site's notebook pages show each code cell's outputs
under it, as PyTorch's and Triton's tutorial sites do. tests/test_executed_notebooks.py tests both.
"""

from __future__ import annotations

import base64
import re
from datetime import datetime

# A long output shows its last lines, after a marker saying how many went before them.
MAX_LINES = 40
# Image outputs by preference, with the file suffix each is shown as; an output holding an image
# shows only the image (its text/plain is a "<Figure size 640x480 ...>" placeholder).
IMAGE_TYPES = {"image/png": "png", "image/jpeg": "jpg", "image/svg+xml": "svg"}
# pymdownx.snippets reads a line `--8<-- "file"` (or `--8<--` alone, opening a list of files) as an
# include, even inside a code block; a `;` before it is the escape, removed when shown. Its pattern:
SNIPPET_LINE = re.compile(
    r"""^([ \t]*)(;*-{1,}8<-{1,}  # the marker, after any escapes
    (?:[ \t]+(?:"(?:\\"|[^"\n\r])+?"|'(?:\\'|[^'\n\r])+?')(?![ \t]))?  # a quoted file name
    )\r?$""",
    re.M | re.X,
)


def text_of(value: str | list[str]) -> str:
    """A notebook's multi-line string: nbformat stores it as one string or as a list of lines."""
    return value if isinstance(value, str) else "".join(value)


def text_block(text: str, max_lines: int = MAX_LINES) -> list[str]:
    """`text` as a fenced ```text block, as Markdown lines. Its last `max_lines` lines when longer,
    under a "[... N lines ...]" marker; the fence is longer than any run of backticks inside."""
    lines = text.rstrip("\n").splitlines()
    if len(lines) > max_lines:
        lines = [f"[... {len(lines) - max_lines} lines ...]", *lines[-max_lines:]]
    body = SNIPPET_LINE.sub(r"\1;\2", "\n".join(lines))
    fence = "`" * max([3, *(len(run) + 1 for run in re.findall(r"`+", body))])
    return [f"{fence}text", *body.split("\n"), fence]


def run_time(cell: dict) -> float | None:
    """The seconds a code cell took, from the timestamps that nbclient (and JupyterLab, with "record
    timing" on) write in `cell["metadata"]["execution"]`: from the kernel starting the cell
    ("iopub.execute_input") to its reply ("shell.execute_reply"). None if they are not there."""
    stamps = cell.get("metadata", {}).get("execution", {})
    for start, end in [
        ("iopub.execute_input", "shell.execute_reply"),
        ("iopub.status.busy", "iopub.status.idle"),
    ]:
        if start in stamps and end in stamps:
            try:
                began, ended = (datetime.fromisoformat(stamps[key]) for key in (start, end))
            except (TypeError, ValueError):
                continue
            return max(0.0, (ended - began).total_seconds())
    return None


def format_seconds(seconds: float) -> str:
    """1.234 -> "1.2 s", 42.4 -> "42 s", 125 -> "2 min 5 s", 0.01 -> "under 0.1 s"."""
    if seconds < 0.05:
        return "under 0.1 s"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


def outputs_markdown(cell: dict, image_stem: str) -> tuple[list[str], dict[str, bytes]]:
    """Markdown lines that show a code cell's outputs on the page, under the cell's code.

    In: one cell of an executed notebook (nbformat 4, as a dict: `cell["outputs"]`, and the timing
    in `cell["metadata"]["execution"]`), and `image_stem`, the start of its image files' names
    (say "chapter3-cell7": the first image is "chapter3-cell7-1.png").

    Out: the lines (empty for a cell without outputs or timing), and the images, file name to
    bytes, which the caller writes beside the page, since the lines refer to them by bare name:

    - stream text (stdout, stderr) and a result's text/plain: a ```text block, the last MAX_LINES
      lines of a longer one (consecutive stream outputs of one name make one block);
    - an error: its "ename: evalue" in a ```text block (not the traceback);
    - an image (png, jpeg, svg): `![Output 1 of the cell](<image_stem>-1.png)`;
    - the cell's run time, when recorded: "*ran in 1.2 s*", last.
    """
    lines: list[str] = []
    images: dict[str, bytes] = {}
    pending_stream: tuple[str, str] | None = None  # (name, text) not yet written

    def flush_stream() -> None:
        nonlocal pending_stream
        if pending_stream is not None and pending_stream[1].strip():
            lines.extend([*text_block(pending_stream[1]), ""])
        pending_stream = None

    for output in cell.get("outputs", []):
        kind = output.get("output_type")
        if kind == "stream":
            name, text = output.get("name", "stdout"), text_of(output.get("text", ""))
            if pending_stream is not None and pending_stream[0] == name:
                pending_stream = (name, pending_stream[1] + text)
            else:
                flush_stream()
                pending_stream = (name, text)
            continue
        flush_stream()
        if kind == "error":
            lines.extend(
                [*text_block(f"{output.get('ename', '')}: {output.get('evalue', '')}"), ""]
            )
        elif kind in ("execute_result", "display_data"):
            data = output.get("data", {})
            image_type = next((t for t in IMAGE_TYPES if t in data), None)
            if image_type is not None:
                payload = text_of(data[image_type])
                name = f"{image_stem}-{len(images) + 1}.{IMAGE_TYPES[image_type]}"
                images[name] = (
                    payload.encode() if image_type == "image/svg+xml" else base64.b64decode(payload)
                )
                lines.extend([f"![Output {len(images)} of the cell]({name})", ""])
            elif "text/plain" in data:
                lines.extend([*text_block(text_of(data["text/plain"])), ""])
    flush_stream()
    seconds = run_time(cell)
    if seconds is not None:
        lines.extend([f"*ran in {format_seconds(seconds)}*", ""])
    return lines, images


def where_it_ran(nb: dict) -> str:
    """One sentence saying where and when an executed copy ran, from the notebook's metadata
    "executed" that tools/execute_notebooks.py writes (date, machine, torch, commit, seconds):
    "Executed on 2026-11-26 on AMD EPYC CPU (2 cores), no GPU, with torch 2.11.0+cu130 at commit
    27de73b; the cells took 48 s." An empty string for a notebook without that metadata."""
    facts = nb.get("metadata", {}).get("executed")
    if not facts:
        return ""
    sentence = f"Executed on {facts.get('date', 'an unknown date')}"
    if facts.get("machine"):
        sentence += f" on {facts['machine']},"
    if facts.get("torch"):
        sentence += f" with torch {facts['torch']}"
    if facts.get("commit"):
        sentence += f" at commit {facts['commit']}"
    sentence = sentence.rstrip(",")
    if facts.get("seconds") is not None:
        sentence += f"; the cells took {format_seconds(facts['seconds'])}"
    return sentence + "."
