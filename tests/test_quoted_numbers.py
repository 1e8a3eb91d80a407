"""A number a lesson quotes in its prose is a number of the results file it links to.

test_repo.py checks the tables that follow a link to docs/perf/; numbers in sentences were left
unchecked, and drifted: chapter 5 once put chapter 3's v4 at "1,269 µs" where chapter 3's results
file said 1,266.0. Here a measured number (a time, a bandwidth, a size, a percentage or a ratio)
in a paragraph that links to docs/perf/....md must appear in a file it links, rounded as the file
shows it; a ratio may instead be the quotient of two numbers the paragraph states. A number quoted
beside another chapter's name needs such a link in its paragraph. Runs alone under pytest."""

from __future__ import annotations

import re
from decimal import Decimal
from itertools import permutations
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(p for p in REPO.glob("chapter*_*") if p.is_dir())
LESSONS = [  # as in test_repo.py
    page
    for chapter in CHAPTERS
    for page in [
        chapter / "README.md",
        *sorted(p for p in chapter.glob("*.md") if p.name != "README.md"),
        *sorted(chapter.glob("further/*.md")),
    ]
]

PERF_LINK = re.compile(r"\((?:\.\./)+(docs/perf/[\w/.-]+\.md)\)")
NUMBER = r"(\d[\d,]*(?:\.\d+)?)"
# "1,266.0 µs", "96%", "2.9x", "1.5 to 2.5 times", and with an en dash or a multiplication sign
# (written \u2013 and \u00d7 here): a range's first number takes the unit of its second.
# Not "2^28", "H100", "sm_90", "v4" or a shape's "65536 x 4096".
QUOTE = re.compile(
    rf"(?<![\w.^/]){NUMBER}(?:\s?(?:\u2013|-| to )\s?{NUMBER})?"
    r"(\s?(?:µs|ms|ns|s|GB/s|TB/s|GiB|MiB|%)|[x\u00d7]| times)(?![\w/])"
)
RATIO = {"x", "\u00d7", "times"}


def paragraphs(text: str) -> list[str]:
    """Each paragraph and each list item of a page, outside code, tables and headings."""
    found, lines, fenced = [], [], False
    for line in [*text.splitlines(), ""]:
        fenced ^= line.startswith("```")
        starts_item = re.match(r"\s*(-|\d+\.) ", line)
        if fenced or line.startswith(("```", "#", "|")) or not line.strip() or starts_item:
            found.append(" ".join(lines))
            lines = [line] if starts_item and not fenced else []
        else:
            lines.append(line)
    return [p for p in found if p]


def quotes(text: str) -> list[tuple[str, str]]:
    """(number without thousands separators, unit) for every measured number in `text`."""
    found = []
    for first, second, unit in QUOTE.findall(text):
        found += [(n.replace(",", ""), unit.strip()) for n in (first, second) if n]
    return found


def rounds_to(exact: Decimal, quoted: str) -> bool:
    """`exact`, rounded to as many decimals as `quoted` shows, is `quoted` (a tie either way)."""
    places = Decimal(quoted).as_tuple().exponent
    return abs(exact - Decimal(quoted)) <= Decimal(5).scaleb(places - 1)


def shows(measured: str, quoted: str, unit: str) -> bool:
    """The file's `measured`, with as many decimals as `quoted` or more, rounds to `quoted`;
    a time quoted in ms or s may be the file's µs or ms."""
    number = Decimal(measured)
    scaled = [quoted, str(Decimal(quoted).scaleb(3))] if unit in ("ms", "s") else [quoted]
    return any(
        number.as_tuple().exponent <= Decimal(q).as_tuple().exponent and rounds_to(number, q)
        for q in scaled
    )


def is_quotient(ratio: str, numbers: list[str]) -> bool:
    """A ratio is checkable when the paragraph states the two numbers it divides."""
    return any(
        rounds_to(Decimal(a) / Decimal(b), ratio) for a, b in permutations(numbers, 2) if Decimal(b)
    )


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: str(p.relative_to(REPO)))
def test_a_number_quoted_beside_a_results_link_is_in_that_file(lesson):
    """ "761 µs against v4's 1,269" beside a link to a file that says 761.6 and 1,266.0 fails."""
    name, missing = lesson.relative_to(REPO), []
    for paragraph in paragraphs(lesson.read_text()):
        sources = PERF_LINK.findall(paragraph)
        if not sources:
            continue
        measured = [
            n.replace(",", "")
            for source in sources
            for n in re.findall(NUMBER, (REPO / source).read_text())
        ]
        stated = [n for n, _ in quotes(paragraph)]
        missing += [
            f"{number} {unit} is in none of {', '.join(sources)}"
            for number, unit in quotes(paragraph)
            if not any(shows(m, number, unit) for m in measured)
            and not (unit in RATIO and is_quotient(number, stated))
        ]
    assert not missing, f"{name}: " + "; ".join(missing)


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: str(p.relative_to(REPO)))
def test_a_number_from_another_chapter_links_its_results_file(lesson):
    """A sentence that names another chapter and quotes a measured number (chapter 5 quoting
    chapter 3's v4) has a docs/perf/ link in its paragraph, so the test above can check it."""
    chapter = re.match(r"chapter(\d+)", lesson.relative_to(REPO).parts[0]).group(1)
    for paragraph in paragraphs(lesson.read_text()):
        if PERF_LINK.search(paragraph):
            continue
        for sentence in re.split(r"(?<=[.;])\s", paragraph):
            others = set(re.findall(r"\b[Cc]hapter (\d+)", sentence)) - {chapter}
            assert not (others and quotes(sentence)), (
                f"{lesson.relative_to(REPO)}: {sentence!r} quotes a number beside chapter "
                f"{', '.join(sorted(others))}; link the docs/perf/ file it comes from"
            )
