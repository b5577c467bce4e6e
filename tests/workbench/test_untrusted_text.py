"""Untrusted text (trace content, ids, file text, model output, URL parameters, exception messages) reaches
Streamlit's Markdown only through the escaping helpers of `workbench.common.text`: a static check of
every page and component, so a new `st.caption(f"... {episode.task}")` fails here instead of in a browser.

The rules, for each argument Streamlit renders as Markdown (bodies, labels, help, metric values, radio
options, tab labels; plain-text widgets such as st.code, st.text, st.dataframe and select box options are
not checked):

- every f-string interpolation is an escaper call (`md_escape`, `md_code`), a number with a numeric format
  spec (`{x:.3f}`, `{n:d}`), `len(...)`, an UPPER_CASE constant, or a local variable holding such text;
- a bare expression is a literal, an escaper call, a local variable or same-module function whose values
  follow these rules, or a parameter (the callers' text: wrappers that render their parameter escape it);
  attributes, subscripts, other calls and caught exceptions are refused;
- session-state keys named `*notice*` / `*error*` hold Markdown, so what is stored there is checked too;
- `unsafe_allow_html=True` takes only the HTML escapers of `worldsmith.sim.htmlview`.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from workbench_support import REPO

SOURCES = sorted([*(REPO / "pages").glob("*.py"), *(REPO / "workbench").rglob("*.py")])
ESCAPERS = frozenset({"md_escape", "md_code", "literal_table"})  # literal_table: every cell of a table md_escape'd
HTML_ESCAPERS = frozenset({"text_html", "diff_html"})
NUMBER_CALLS = frozenset({"len", "int", "round", "seconds_text"})  # seconds_text: a duration's digits and units
SEQUENCE_CALLS = frozenset({"list", "tuple", "sorted"})
ALL = -1  # every positional argument

_BODIES = ("markdown", "caption", "title", "header", "subheader", "info", "warning", "error", "success", "toast",
           "badge", "spinner", "table")
_LABELS = ("button", "checkbox", "color_picker", "date_input", "download_button", "expander", "file_uploader",
           "form_submit_button", "link_button", "multiselect", "number_input", "popover", "selectbox", "slider",
           "status", "tabs", "text_area", "text_input", "time_input", "toggle")
# Streamlit method -> positional arguments rendered as Markdown
MARKDOWN_ARGS: dict[str, tuple[int, ...]] = {
    **{name: (0,) for name in _BODIES + _LABELS}, "write": (ALL,), "metric": (0, 1, 2), "progress": (1,),
    "radio": (0, 1), "pills": (0, 1), "segmented_control": (0, 1), "select_slider": (0, 1), "page_link": (),
}
WRAPPERS: dict[str, tuple[int, ...]] = {"notice": (0,), "submit_patch": ()}  # ours, rendering a parameter
NOT_STREAMLIT = frozenset({"store", "process"})  # receivers whose methods share a name with Streamlit's
MARKDOWN_KEYWORDS = frozenset({"body", "label", "help", "text", "captions", "title", "done"})
METRIC_KEYWORDS = frozenset({"value", "delta"})
OPTION_FORMATTERS = frozenset({"radio", "pills", "segmented_control", "select_slider"})  # format_func is Markdown
_NUMERIC_SPEC = re.compile(r".*[bcdeEfFgGnoxX%,_]$")  # what a str cannot be formatted with
_MARKDOWN_STATE_KEY = re.compile(r"notice|error", re.IGNORECASE)


def _name(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _markdown_positions(call: ast.Call) -> tuple[int, ...] | None:
    """The positional arguments `call` renders as Markdown (a Streamlit method or one of WRAPPERS); None: not one."""
    func = call.func
    if isinstance(func, ast.Name):
        return WRAPPERS.get(func.id)
    if isinstance(func, ast.Attribute) and not (isinstance(func.value, ast.Name) and func.value.id in NOT_STREAMLIT):
        return MARKDOWN_ARGS.get(func.attr)
    return None


def _constant(name: str) -> bool:
    return name.isupper()


@dataclass
class Scope:
    """A function body (or a module's top level): what its local names are bound to."""

    body: list[ast.stmt]
    params: frozenset[str] = frozenset()
    parent: Scope | None = None
    bound: dict[str, list[ast.expr | None]] = field(default_factory=dict)  # None: bound by `except ... as`

    def __post_init__(self) -> None:
        for node in _walk_local(self.body):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    self._bind(target, node.value)
            elif isinstance(node, ast.AugAssign | ast.AnnAssign) and node.value is not None:
                self._bind(node.target, node.value)
            elif isinstance(node, ast.NamedExpr):
                self._bind(node.target, node.value)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                self.bound.setdefault(node.name, []).append(None)

    def _bind(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self.bound.setdefault(target.id, []).append(value)
        elif isinstance(target, ast.Tuple | ast.List):  # `a, b = x, y` pairs up; `a, b = f()` binds both to f()
            pairs = isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts)
            for position, element in enumerate(target.elts):
                self._bind(element, value.elts[position] if pairs else value)

    def values(self, name: str) -> list[ast.expr | None] | None:
        """What `name` is bound to here or in the enclosing scope; None for a parameter or loop variable."""
        if name in self.bound:
            return self.bound[name]
        if name in self.params or self.parent is None:
            return None
        return self.parent.values(name)


def _walk_local(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes of `body`, not descending into nested functions or classes."""
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _params(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> frozenset[str]:
    args = function.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    return frozenset(names)


def _operands(node: ast.expr) -> list[ast.expr] | None:
    """What an operator expression may show as it is (both sides, both branches, every value); None for others."""
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.IfExp):
        return [node.body, node.orelse]
    if isinstance(node, ast.BoolOp):
        return list(node.values)
    return None

class Checker:
    """The rules above over one module; `problems` lists (line, source) of each text that breaks them."""

    def __init__(self, tree: ast.Module) -> None:
        self.functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
        self.problems: list[tuple[int, str]] = []
        self._visiting: set[str] = set()  # functions and names being resolved (no endless recursion)
        self._sink = 0  # the line of the call (or store) being checked
        self.module = Scope(tree.body)
        self._check_scope(self.module)

    def _check_scope(self, scope: Scope) -> None:
        for node in _walk_local(scope.body):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self._check_scope(Scope(node.body, _params(node), scope))
            elif isinstance(node, ast.Call):
                self._sink = node.lineno
                self._check_call(node, scope)
            elif isinstance(node, ast.Assign) and any(_markdown_state(t) for t in node.targets):
                self._sink = node.lineno
                self._expect(node.value, scope)

    def _check_call(self, call: ast.Call, scope: Scope) -> None:
        name, positions = _name(call), _markdown_positions(call)
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        html = isinstance(keywords.get("unsafe_allow_html"), ast.Constant) and keywords["unsafe_allow_html"].value
        if name == "html" or html:
            for argument in call.args[:1]:
                self._expect_html(argument, scope)
            return
        if positions is None:
            if isinstance(call.func, ast.Attribute) and "help" in keywords:  # st.column_config.*Column(help=)
                self._expect(keywords["help"], scope)
            return
        formatter = keywords.get("format_func") if name in OPTION_FORMATTERS else None
        for index, argument in enumerate(call.args):
            if (ALL in positions or index in positions) and not (formatter is not None and index == 1):
                self._expect(argument, scope)
        if formatter is not None:
            self._expect_formatter(formatter, scope)
        for key, value in keywords.items():
            if key in MARKDOWN_KEYWORDS or (name == "metric" and key in METRIC_KEYWORDS):
                self._expect(value, scope)

    def _flag(self, node: ast.AST) -> None:
        where = "" if node.lineno == self._sink else f" (line {node.lineno})"
        self.problems.append((self._sink, ast.unparse(node) + where))

    def _expect(self, node: ast.expr, scope: Scope, *, in_fstring: bool = False) -> None:
        """Flag the parts of `node` that may carry untrusted text into Markdown."""
        if isinstance(node, ast.Constant) or _escaped(node):
            return
        operands = _operands(node)
        if operands is not None:
            for operand in operands:
                self._expect(operand, scope, in_fstring=in_fstring)
        elif isinstance(node, ast.JoinedStr):
            for part in node.values:
                if isinstance(part, ast.FormattedValue) and not _numeric(part):
                    self._expect(part.value, scope, in_fstring=True)
        elif isinstance(node, ast.List | ast.Tuple | ast.Set):
            for element in node.elts:
                self._expect(element.value if isinstance(element, ast.Starred) else element, scope)
        elif isinstance(node, ast.ListComp | ast.GeneratorExp):
            self._expect(node.elt, scope)
        elif isinstance(node, ast.Dict | ast.DictComp):
            return  # st.write shows a mapping as JSON
        elif isinstance(node, ast.Name):
            self._expect_name(node, scope, in_fstring=in_fstring)
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and _constant(node.value.id):
            return
        elif isinstance(node, ast.Call):
            self._expect_call(node, scope)
        else:
            self._flag(node)

    def _expect_name(self, node: ast.Name, scope: Scope, *, in_fstring: bool) -> None:
        if _constant(node.id):
            return
        values = scope.values(node.id)
        if values is None:
            if in_fstring:
                self._flag(node)  # a parameter or loop variable interpolated into Markdown
            return
        if f"name {node.id}" in self._visiting:
            return
        self._visiting.add(f"name {node.id}")
        for value in values:
            if value is None:
                self._flag(node)  # an exception message
            else:
                self._expect(value, scope, in_fstring=in_fstring)
        self._visiting.discard(f"name {node.id}")

    def _expect_call(self, call: ast.Call, scope: Scope) -> None:
        name = _name(call)
        if isinstance(call.func, ast.Attribute) and call.func.attr == "join":
            for argument in call.args:
                self._expect(argument, scope)
        elif name in NUMBER_CALLS:
            return
        elif (name == "get" and isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
              and _constant(call.func.value.id)):
            for default in call.args[1:]:  # a constant mapping's value, else the default
                self._expect(default, scope)
        elif name in SEQUENCE_CALLS and isinstance(call.func, ast.Name):
            for argument in call.args:
                self._expect(argument, scope)
        elif _markdown_state_read(call):
            return  # checked where it was stored
        elif isinstance(call.func, ast.Name) and name in self.functions and name not in self._visiting:
            self._expect_returns(self.functions[name])
        else:
            self._flag(call)

    def _expect_returns(self, function: ast.FunctionDef) -> None:
        self._visiting.add(function.name)
        scope = Scope(function.body, _params(function), self.module)
        for node in _walk_local(function.body):
            if isinstance(node, ast.Return) and node.value is not None:
                self._expect(node.value, scope)
        self._visiting.discard(function.name)

    def _expect_formatter(self, formatter: ast.expr, scope: Scope) -> None:
        if isinstance(formatter, ast.Lambda):
            self._expect(formatter.body, Scope([], _params(formatter), scope), in_fstring=True)
        elif isinstance(formatter, ast.Name) and formatter.id in ESCAPERS:
            return
        elif isinstance(formatter, ast.Attribute) and formatter.attr in ("get", "__getitem__") and (
                isinstance(formatter.value, ast.Name) and _constant(formatter.value.id)
                or isinstance(formatter.value, ast.Dict)
                and all(isinstance(v, ast.Constant) for v in formatter.value.values)):
            return
        else:
            self._flag(formatter)

    def _expect_html(self, node: ast.expr, scope: Scope) -> None:
        if isinstance(node, ast.Constant) or isinstance(node, ast.Name) and _constant(node.id):
            return
        if isinstance(node, ast.Call) and _name(node) in HTML_ESCAPERS:
            return
        if isinstance(node, ast.IfExp):
            self._expect_html(node.body, scope)
            self._expect_html(node.orelse, scope)
        elif isinstance(node, ast.Name) and scope.values(node.id):
            for value in scope.values(node.id) or []:
                if value is None:
                    self._flag(node)
                else:
                    self._expect_html(value, scope)
        else:
            self._flag(node)


def _escaped(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and _name(node) in ESCAPERS


def _numeric(part: ast.FormattedValue) -> bool:
    spec = part.format_spec
    if spec is not None and all(isinstance(v, ast.Constant) for v in spec.values):
        return bool(_NUMERIC_SPEC.match("".join(str(v.value) for v in spec.values)))
    return False


def _state_key(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return node.id if isinstance(node, ast.Name) else None


def _session_state(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "state" or ast.unparse(node).endswith("session_state")


def _markdown_state(target: ast.expr) -> bool:
    """`st.session_state[KEY] = ...` / `state[KEY] = ...` for a key that holds Markdown."""
    if not isinstance(target, ast.Subscript) or not _session_state(target.value):
        return False
    key = _state_key(target.slice)
    return key is not None and bool(_MARKDOWN_STATE_KEY.search(key))


def _markdown_state_read(call: ast.Call) -> bool:
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr in ("pop", "get") and call.args):
        return False
    key = _state_key(call.args[0])
    return _session_state(func.value) and key is not None and bool(_MARKDOWN_STATE_KEY.search(key))


def problems_in(source: str) -> list[tuple[int, str]]:
    return sorted(set(Checker(ast.parse(source)).problems))


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(REPO)))
def test_markdown_gets_only_escaped_text(path: Path) -> None:
    found = problems_in(path.read_text(encoding="utf-8"))
    assert not found, "\n".join(f"{path.relative_to(REPO)}:{line}: {text}" for line, text in found)


@pytest.mark.parametrize("source", [
    'st.caption(f"Source: {episode.source.format}")',
    'st.subheader(rule.id)',
    'cols[0].metric("Environment", episode.env_id or "-")',
    'def f():\n    try:\n        pass\n    except ValueError as error:\n        st.error(error)',
    'label = f"{call.spec} · x"\nst.expander(label)',
    'st.radio("Scope", [f"env: {env}" for env in envs])',
    'st.radio("Mode", modes, format_func=lambda m: f"{m}!")',
    'st.tabs(["Rules", book.name])',
    'st.markdown(body, unsafe_allow_html=True)',
    'st.session_state["sim_error"] = str(error)',
    'st.page_link(page, label=f"Open {dataset}")',
    'def render(title):\n    st.markdown(f"**{title}**")',
    'notice(f"Dataset `{dataset}` is not in this workspace.")',
    'submit_patch(store, name, base, ops, message="m", done=f"Saved `{rule.id}`")',
    'def go():\n    st.caption(_label())\ndef _label():\n    return f"run {info.name}"',
])
def test_the_check_catches(source: str) -> None:
    assert problems_in(textwrap.dedent(source))


@pytest.mark.parametrize("source", [
    'st.caption(f"Source: {md_code(where)} ({md_escape(fmt)}) · {len(rows)} rows · {score:.3f}")',
    'st.metric("Turns", n_turns)',
    'label = f"{md_code(run)} · x"\nst.expander(label + f" {done:d}")',
    'st.radio("Scope", options, format_func=md_escape)',
    'st.radio("Mode", list(MODES), format_func=MODES.get)',
    'st.markdown(text_html(text), unsafe_allow_html=True)',
    'def render(title):\n    st.markdown(title)',
    'st.write({status: count for status, count in rows})',
])
def test_the_check_allows(source: str) -> None:
    assert problems_in(textwrap.dedent(source)) == []
