"""Programs to execute (seed 002's applications of seq2seq, S104): Zaremba and Sutskever's "Learning to Execute"
(2014) task, whose examples the seed shows ("compiler"-like code → output):

    j=8584;for x in range(8):j+=920;b=(1500+j);print((b+7567))            -> 25011
    i=8827;c=(i-5347);print((c+8704) if 2641<8500 else 5308)               -> 12184

A program composes ``nesting`` operations, each drawn from the paper's six (its generator, ``learning_to_execute``'s
``operations.lua``): a sum or difference ``(a+b)``, a small product ``(a*k)``, an operand alone, a variable
``v=a;`` then ``(v+b)``, a small loop ``v=a;for x in range(k):v+=b``, and a conditional ``(c if a<b else d)``. An
operand is the value of the operation before (each used once), else a number of at most ``length`` digits; ``k``
is at most 4·``length``. The program then prints the last operation's value, which is the target.

The source is one line, its statements joined by ``;`` (a loop's body is one statement on its line), so that
``run(source)`` executes it as the Python it is: the targets are checked against Python itself.
"""

from __future__ import annotations

import contextlib
import io
import random
import string
from collections.abc import Callable

Operand = tuple[str, int]  # an expression and its value
Operation = Callable[["_Program"], Operand]


class _Program:
    """One program being written: its statements, the values waiting to be used, its unused variable names."""

    def __init__(self, rng: random.Random, length: int) -> None:
        self.rng, self.length = rng, length
        self.statements: list[str] = []
        self.waiting: list[Operand] = []
        self.names = [c for c in string.ascii_lowercase if c != "x"]  # x is the loops' counter
        rng.shuffle(self.names)

    def operand(self) -> Operand:
        """The value of the operation before, else a number of at most ``length`` digits."""
        if self.waiting:
            return self.waiting.pop()
        value = self.rng.randint(1, 10**self.length - 1)
        return str(value), value

    def operands(self, n: int) -> list[Operand]:
        """``n`` operands in a random order (the one before may land in any place)."""
        drawn = [self.operand() for _ in range(n)]
        self.rng.shuffle(drawn)
        return drawn

    def small(self) -> int:
        """A loop count or a factor: 1 to 4·length."""
        return self.rng.randint(1, 4 * self.length)

    def variable(self) -> str:
        return self.names.pop()


def _sum(p: _Program) -> Operand:
    (a, va), (b, vb) = p.operands(2)
    return (f"({a}+{b})", va + vb) if p.rng.random() < 0.5 else (f"({a}-{b})", va - vb)


def _small_product(p: _Program) -> Operand:
    a, va = p.operand()
    k = p.small()
    return (f"({a}*{k})", va * k) if p.rng.random() < 0.5 else (f"({k}*{a})", va * k)


def _alone(p: _Program) -> Operand:
    return p.operand()


def _variable(p: _Program) -> Operand:
    (a, va), (b, vb) = p.operands(2)
    name = p.variable()
    p.statements.append(f"{name}={a}")
    return (f"({name}+{b})", va + vb) if p.rng.random() < 0.5 else (f"({name}-{b})", va - vb)


def _loop(p: _Program) -> Operand:
    (a, va), (b, vb) = p.operands(2)
    name, k = p.variable(), p.small()
    sign = "+" if p.rng.random() < 0.5 else "-"
    p.statements += [f"{name}={a}", f"for x in range({k}):{name}{sign}={b}"]
    return name, va + k * vb if sign == "+" else va - k * vb


def _conditional(p: _Program) -> Operand:
    (a, va), (b, vb), (c, vc), (d, vd) = p.operands(4)
    if p.rng.random() < 0.5:
        return f"({c} if {a}>{b} else {d})", vc if va > vb else vd
    return f"({c} if {a}<{b} else {d})", vc if va < vb else vd


OPERATIONS: tuple[Operation, ...] = (_sum, _small_product, _alone, _variable, _loop, _conditional)


def program(rng: random.Random, length: int, nesting: int) -> tuple[str, int]:
    """One program of ``nesting`` operations on numbers of at most ``length`` digits, and what it prints."""
    p = _Program(rng, length)
    for _ in range(nesting):
        p.waiting.append(rng.choice(OPERATIONS)(p))
    expr, value = p.waiting.pop()
    return ";".join([*p.statements, f"print({expr})"]), value


def run(source: str) -> str:
    """What Python prints when it runs ``source`` (its statements one to a line), without the newline."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec("\n".join(source.split(";")), {})  # generated arithmetic: the task checks its targets against Python
    return out.getvalue().rstrip("\n")
