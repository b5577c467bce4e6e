"""Every registered metric, a plug-in's included, keeps its edge-case promises (issue 42): identical texts score 1,
an empty prediction scores 0 against a reference with any content (punctuation included), a declared-symmetric
metric is symmetric, and blank or truncated texts get a defined score in [0, 1] or None. Checked on generated
texts (hypothesis) and, at report time, on fixed ones (`worldsmith plugins`)."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worldsmith.cli.main import main
from worldsmith.evals.metric_checks import edge_problems, metric_edge_problems, registered_metric_problems
from worldsmith.evals.metrics import METRIC_REGISTRY, is_symmetric, metric, metric_names, metric_scores

# Words, punctuation (JSON's included), whitespace and a non-ASCII letter: the texts observations are made of.
TEXT = st.text(alphabet=st.sampled_from(list("ab1 _\n\t{}[]()\":,.!é")), max_size=30)
CONTENT = TEXT.filter(lambda text: bool(text.strip()))  # has a non-whitespace character
BLANK = st.text(alphabet=st.sampled_from([" ", "\n", "\t", "\r"]), max_size=5)
PROPERTY = settings(max_examples=150, deadline=None)


def in_range(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and 0.0 <= value <= 1.0)


@pytest.mark.parametrize("punctuation", ['{"', "(", "[", "...", "}", '"'])
def test_an_empty_prediction_never_matches_a_punctuation_only_reference(punctuation: str) -> None:
    scores = metric_scores("", punctuation)
    assert scores["token_f1"] == 0.0 and scores["edit_similarity"] == 0.0 and scores["exact_match"] == 0.0
    assert metric_scores(punctuation, punctuation)["token_f1"] == 1.0
    assert metric_scores(punctuation, punctuation)["edit_similarity"] == 1.0


def test_blank_texts_equal_the_empty_text_and_punctuation_counts_only_without_words() -> None:
    assert metric_scores("  \n", "")["token_f1"] == 1.0 and metric_scores("", "\t")["edit_similarity"] == 1.0
    assert metric_scores("{}", '{"')["token_f1"] == pytest.approx(2 * 0.5 * 0.5)  # one of two marks shared
    assert metric_scores("mug", "{")["token_f1"] == 0.0  # a word against none: nothing shared, as before
    assert metric_scores("Nothing happens.", "nothing happens")["token_f1"] == 1.0  # with words: marks ignored


@pytest.mark.parametrize("name", metric_names())
def test_a_registered_metric_keeps_its_promises_on_the_fixed_edge_texts(name: str) -> None:
    assert metric_edge_problems(name) == []


@pytest.mark.parametrize("name", metric_names())
@PROPERTY
@given(text=TEXT)
def test_identical_texts_score_one(name: str, text: str) -> None:
    assert METRIC_REGISTRY.get(name)(text, text) in (1.0, None)


@pytest.mark.parametrize("name", metric_names())
@PROPERTY
@given(reference=CONTENT)
def test_an_empty_prediction_scores_zero_against_any_content(name: str, reference: str) -> None:
    assert METRIC_REGISTRY.get(name)("", reference) in (0.0, None)


@pytest.mark.parametrize("name", [n for n in metric_names() if is_symmetric(n)])
@PROPERTY
@given(a=TEXT, b=TEXT)
def test_a_declared_symmetric_metric_is_symmetric(name: str, a: str, b: str) -> None:
    function = METRIC_REGISTRY.get(name)
    assert function(a, b) == pytest.approx(function(b, a))


@pytest.mark.parametrize("name", metric_names())
@PROPERTY
@given(text=TEXT, other=TEXT, cut=st.integers(min_value=0, max_value=30), blank=BLANK)
def test_truncated_and_blank_texts_get_a_defined_score(name: str, text: str, other: str, cut: int,
                                                       blank: str) -> None:
    function = METRIC_REGISTRY.get(name)
    for prediction, reference in ((text[:cut], text), (text, text[:cut]), (blank, other), (other, blank),
                                  (blank, blank), (text[:cut], other[:cut])):
        assert in_range(function(prediction, reference))


def test_the_built_ins_declare_their_symmetry() -> None:
    assert [n for n in ("exact_match", "edit_similarity", "token_f1", "json_f1") if is_symmetric(n)] == [
        "exact_match", "edit_similarity", "token_f1"]  # json_f1 is None on a non-JSON reference only


@pytest.fixture
def careless() -> Iterator[str]:
    """A plug-in metric with the defect issue 42 found: an empty prediction scores 1 against punctuation."""

    @metric(symmetric=True)
    def careless_overlap(prediction: str, reference: str) -> float:
        a, b = set(prediction.split()) - {"{", '"'}, set(reference.split())
        return 1.0 if not a else len(a & b) / len(a)

    yield "careless_overlap"
    METRIC_REGISTRY.unregister("careless_overlap")


def test_a_plug_in_that_breaks_a_promise_is_named_with_what_it_breaks(careless: str) -> None:
    problems = registered_metric_problems()
    assert list(problems) == [careless]
    assert any("empty prediction" in p for p in problems[careless])
    assert any("symmetric" in p for p in problems[careless])


def test_worldsmith_plugins_reports_a_metric_failing_the_edge_checks(careless: str,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", "--json"]) == 0
    listed = orjson.loads(capsys.readouterr().out)["extension_points"]["metric"]
    assert [f["name"] for f in listed["edge_failures"]] == [careless]
    assert main(["plugins"]) == 0
    assert f"{careless} fails the metric edge checks: scores an empty prediction 1" in capsys.readouterr().out


def test_edge_problems_name_a_range_error_and_an_exception() -> None:
    assert edge_problems(lambda p, r: 2.0, symmetric=False)[0].startswith("returned 2.0, outside [0, 1]")
    assert edge_problems(lambda p, r: 1 / len(p), symmetric=False)[0].startswith("raised ZeroDivisionError")
