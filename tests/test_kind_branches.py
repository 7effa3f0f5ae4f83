"""Nothing outside the registry branches on the kind of model (issue 35): the source of ``src/seqlab`` is read
(AST) for the three forms such a branch takes, and each form planted in a snippet is caught.

* a kind predicate: an attribute ``is_<kind>`` (``is_classifier``, ``is_span``, ``is_vectors``, ``is_language_model``,
  ``is_masked_lm``, or ``is_`` + any kind's name or ``model.type``);
* a comparison of a ``model.type`` (an attribute ``type``, or a name ``model_type``) or of a kind's ``name`` with a
  kind's string;
* an ``isinstance`` against a model section class (a ``seqlab.config.ModelSection`` subclass, or a union of them)
  anywhere but in an ``assert`` (which narrows a type and decides nothing) or in the module that defines it.

``seqlab/registry.py`` and ``seqlab/kinds/`` are the registry: they may.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from seqlab import registry
from seqlab.config import ModelSection

SRC = Path(__file__).resolve().parents[1] / "src" / "seqlab"
REGISTRY = {SRC / "registry.py", *(SRC / "kinds").glob("*.py")}
ALIASES = {"Seq2seqConfig", "LanguageModelConfig"}  # seqlab.model's unions of sections


def _section_classes() -> set[str]:
    """The names of every model section class and of the shapes they share."""
    names: set[str] = set()
    for section in registry.model_sections().values():
        names |= {c.__name__ for c in section.__mro__ if issubclass(c, ModelSection) and c is not ModelSection}
    return names | ALIASES


def _kind_words() -> set[str]:
    return {k.name for k in registry.kinds()} | set(registry.all_model_types())


def _names_in(node: ast.expr) -> list[str]:
    """The class names an isinstance's second argument names: ``C``, ``m.C``, ``(A, B)``, ``A | B``."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.Tuple):
        return [n for element in node.elts for n in _names_in(element)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _names_in(node.left) + _names_in(node.right)
    return []


def _is_kind_value(node: ast.expr) -> bool:
    """``x.type``, ``model_type``, ``kind.name``: what holds a model type or a kind's name."""
    return (isinstance(node, ast.Attribute) and node.attr in ("type", "name") and _mentions_model_or_kind(node.value)
            or isinstance(node, ast.Name) and node.id == "model_type")


def _mentions_model_or_kind(node: ast.expr) -> bool:
    text = ast.unparse(node)
    return "model" in text or "kind" in text or "cfg" in text or "section" in text


def _strings(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [s for element in node.elts for s in _strings(element)]
    return []


class KindBranches(ast.NodeVisitor):
    """Collects ``line: what`` for each kind branch in one module's tree."""

    def __init__(self, sections: set[str], words: set[str], defined_here: set[str]) -> None:
        self.sections, self.words, self.defined_here = sections - defined_here, words, defined_here
        self.predicates = {"is_language_model", "is_masked_lm", "is_classifier"} | {f"is_{w}" for w in words}
        self.found: list[str] = []
        self._in_assert = False

    def visit_Assert(self, node: ast.Assert) -> None:
        self._in_assert = True
        self.generic_visit(node)
        self._in_assert = False

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in self.predicates:
            self.found.append(f"{node.lineno}: kind predicate {node.attr}")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name in self.predicates:
            self.found.append(f"{node.lineno}: kind predicate {node.name}")
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        sides = [node.left, *node.comparators]
        if any(_is_kind_value(side) for side in sides) and any(
                s in self.words for side in sides for s in _strings(side)):
            self.found.append(f"{node.lineno}: compares a model type or kind: {ast.unparse(node)}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if (isinstance(node.func, ast.Name) and node.func.id == "isinstance" and len(node.args) == 2
                and not self._in_assert and set(_names_in(node.args[1])) & self.sections):
            self.found.append(f"{node.lineno}: isinstance against a model section: {ast.unparse(node)}")
        self.generic_visit(node)


def kind_branches(source: str) -> list[str]:
    tree = ast.parse(source)
    defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    visitor = KindBranches(_section_classes(), _kind_words(), defined)
    visitor.visit(tree)
    return visitor.found


def test_no_module_outside_the_registry_branches_on_the_kind():
    found = [f"{path.relative_to(SRC.parent)}:{line}" for path in sorted(SRC.rglob("*.py")) if path not in REGISTRY
             for line in kind_branches(path.read_text(encoding="utf-8"))]
    assert not found, "branches on the kind outside seqlab.registry / seqlab.kinds:\n" + "\n".join(found)


@pytest.mark.parametrize("snippet", [
    "if config.is_classifier:\n    pass",
    "x = run.is_vectors()",
    "def is_span(self):\n    return True",
    "if config.model.type == 'rnn':\n    pass",
    "best = 'loss' if cfg.type in ('lm', 'transformer_lm') else 'bleu'",
    "if model_type != 'bert':\n    pass",
    "if kind.name == 'classifier':\n    pass",
    "if isinstance(config.model, TransformerConfig):\n    pass",
    "ok = isinstance(cfg, seqlab.model.bert.BertConfig | EncoderConfig)",
    "if not isinstance(cfg, (LMConfig, RNNConfig)):\n    raise ValueError",
    "if isinstance(cfg, Seq2seqConfig):\n    pass",
])
def test_each_form_of_a_kind_branch_is_caught(snippet):
    assert kind_branches(snippet), snippet


@pytest.mark.parametrize("snippet", [
    "assert isinstance(config.model, TransformerConfig)",  # narrows a type for mypy
    "if isinstance(model, Transformer):\n    pass",  # a module, not a section
    "if self.train.schedule == 'transformer':\n    pass",  # a schedule's name, not a model type
    "if path.name == 'bert':\n    pass",
    "class TransformerConfig:\n    pass\nok = isinstance(x, TransformerConfig)",  # the module that defines it
])
def test_what_is_no_kind_branch_passes(snippet):
    assert not kind_branches(snippet), snippet


PAGE = SRC / "web" / "app.js"
JS_TYPE_TEST = re.compile(r"\.type\s*[!=]==?|[!=]==?\s*[\w.]*\.type\b")  # model.type === "lm", "lm" !== m.type


def test_the_page_asks_the_server_for_the_shape_not_the_model_type():
    """The page heads each kind with the line its model section writes (``/api/info``'s ``shape``): it never
    compares a ``model.type`` itself, so a new model type needs no change to it."""
    found = [line.strip() for line in PAGE.read_text(encoding="utf-8").splitlines() if JS_TYPE_TEST.search(line)]
    assert not found, found
    assert JS_TYPE_TEST.search('const size = model.type === "transformer"')
    assert JS_TYPE_TEST.search('if ("lm" !== info.model.type) {')
