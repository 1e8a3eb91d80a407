"""The website's executed notebooks (docs/notebooks/, written by tools/execute_notebooks.py) are
those of the chapters, run to the end, and tools/notebook_outputs.py shows their outputs.

    .venv/bin/python -m pytest tests/test_executed_notebooks.py

Cheap: no kernel runs and nothing is built; a notebook edited since its copy was written fails
here with the command that refreshes the copy.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))

from execute_notebooks import (  # noqa: E402
    MAX_BYTES,
    chapter_notebooks,
    copy_of,
    refresh_command,
    without_machine_paths,
)
from notebook_outputs import MAX_LINES, outputs_markdown, where_it_ran  # noqa: E402
from test_repo import machine_paths_in  # noqa: E402

NOTEBOOKS = chapter_notebooks()
IDS = [p.name for p in NOTEBOOKS]


def code_sources(nb: dict) -> list[str]:
    return ["".join(cell["source"]) for cell in nb["cells"] if cell["cell_type"] == "code"]


def executed_copy(notebook: Path) -> dict:
    copy = copy_of(notebook)
    if not copy.exists():
        pytest.fail(f"no executed copy {copy.relative_to(REPO)}: run {refresh_command(notebook)}")
    return json.loads(copy.read_text())


def test_every_chapter_has_a_notebook():
    assert len(NOTEBOOKS) == 5, NOTEBOOKS


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=IDS)
def test_copy_holds_the_chapter_notebooks_code(notebook):
    chapter = json.loads(notebook.read_text())
    assert code_sources(executed_copy(notebook)) == code_sources(chapter), (
        f"{notebook.relative_to(REPO)} changed since its executed copy was written: "
        f"run {refresh_command(notebook)}"
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=IDS)
def test_every_code_cell_ran_without_an_unexpected_error(notebook):
    """A cell tagged raises-exception (nbmake's and nbclient's tag) may end in an error."""
    for index, cell in enumerate(executed_copy(notebook)["cells"]):
        if cell["cell_type"] != "code":
            continue
        assert isinstance(cell["execution_count"], int), f"cell {index} did not run"
        if "raises-exception" not in cell["metadata"].get("tags", []):
            errors = [o for o in cell["outputs"] if o["output_type"] == "error"]
            assert errors == [], (
                f"cell {index} failed: {errors[0]['ename']}: {errors[0]['evalue']} (tag it "
                f"raises-exception if it should, then run {refresh_command(notebook)})"
            )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=IDS)
def test_copy_says_where_it_ran(notebook):
    facts = executed_copy(notebook)["metadata"]["executed"]
    assert {"date", "machine", "torch", "commit", "seconds"} <= facts.keys(), facts
    assert where_it_ran(executed_copy(notebook)).startswith(f"Executed on {facts['date']} on ")


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=IDS)
def test_copy_is_small_and_holds_no_machine_path(notebook):
    """tests/test_repo.py checks tracked files only: this checks the copies before they are."""
    copy = copy_of(notebook)
    executed_copy(notebook)
    assert copy.stat().st_size < MAX_BYTES
    assert machine_paths_in(copy.read_text()) == []


# ---- tools/notebook_outputs.py on hand-made cells ----------------------------------------------

TIMING = {
    "execution": {
        "iopub.execute_input": "2026-11-26T10:00:00.000000Z",
        "shell.execute_reply": "2026-11-26T10:00:01.250000Z",
    }
}
PNG = b"\x89PNG\r\n\x1a\n a picture"


def code_cell(*outputs: dict, metadata: dict | None = None) -> dict:
    return {
        "cell_type": "code",
        "execution_count": 1,
        "metadata": metadata or {},
        "outputs": list(outputs),
        "source": "",
    }


def test_stream_text_becomes_a_text_block_with_the_run_time():
    cell = code_cell(
        {"output_type": "stream", "name": "stdout", "text": ["a\n", "b\n"]},
        {"output_type": "stream", "name": "stdout", "text": "c\n"},
        metadata=TIMING,
    )
    lines, images = outputs_markdown(cell, "ch1-cell2")
    assert lines == ["```text", "a", "b", "c", "```", "", "*ran in 1.2 s*", ""]
    assert images == {}


def test_result_text_gets_a_fence_longer_than_its_backticks():
    cell = code_cell(
        {
            "output_type": "execute_result",
            "data": {"text/plain": "````\ncode\n````"},
            "metadata": {},
        }
    )
    lines, _ = outputs_markdown(cell, "x")
    assert lines[0] == "`````text" and lines[-2] == "`````"


def test_long_output_keeps_its_last_lines_under_a_marker():
    text = "".join(f"line {i}\n" for i in range(100))
    lines, _ = outputs_markdown(
        code_cell({"output_type": "stream", "name": "stdout", "text": text}), "x"
    )
    assert lines[1] == f"[... {100 - MAX_LINES} lines ...]"
    assert lines[2] == f"line {100 - MAX_LINES}" and lines[-3] == "line 99"
    assert len(lines) == MAX_LINES + 4  # fence, marker, lines, fence, blank


def test_image_is_returned_with_its_bytes_and_shown_by_name():
    cell = code_cell(
        {
            "output_type": "display_data",
            "data": {"image/png": base64.b64encode(PNG).decode(), "text/plain": "<Figure>"},
            "metadata": {},
        }
    )
    lines, images = outputs_markdown(cell, "chapter3-cell7")
    assert images == {"chapter3-cell7-1.png": PNG}
    assert lines == ["![Output 1 of the cell](chapter3-cell7-1.png)", ""]


def test_error_shows_its_name_and_value_not_the_traceback():
    cell = code_cell(
        {
            "output_type": "error",
            "ename": "ZeroDivisionError",
            "evalue": "division by zero",
            "traceback": ["Traceback ...", "  File ..."],
        }
    )
    lines, _ = outputs_markdown(cell, "x")
    assert lines == ["```text", "ZeroDivisionError: division by zero", "```", ""]


def test_cell_without_outputs_or_timing_shows_nothing():
    assert outputs_markdown(code_cell(), "x") == ([], {})


def test_where_it_ran_is_one_sentence_from_the_metadata():
    nb = {
        "metadata": {
            "executed": {
                "date": "2026-11-26",
                "machine": "AMD EPYC CPU (2 cores), no GPU",
                "torch": "2.11.0+cu130",
                "commit": "27de73b+changes",
                "seconds": 48.2,
            }
        }
    }
    assert where_it_ran(nb) == (
        "Executed on 2026-11-26 on AMD EPYC CPU (2 cores), no GPU, with torch 2.11.0+cu130 at "
        "commit 27de73b+changes; the cells took 48 s."
    )
    assert where_it_ran({"metadata": {}}) == ""


def test_machine_paths_are_written_relative_to_the_repository():
    # The user name apart from the folder's: no tracked file may hold a path of one machine.
    user = "alice"
    text = f"{REPO}/build/x.so {Path.home()}/.cache/y /tmp/torchinductor_{user}/z"
    assert without_machine_paths(text) == (
        "<repo>/build/x.so ~/.cache/y /tmp/torchinductor_<user>/z"
    )


def test_output_that_looks_like_a_snippet_include_is_escaped():
    """pymdownx.snippets would include docs.txt even inside the code block; `;` escapes it."""
    cell = code_cell({"output_type": "stream", "name": "stdout", "text": '--8<-- "docs.txt"\n'})
    assert outputs_markdown(cell, "x")[0][1] == ';--8<-- "docs.txt"'
