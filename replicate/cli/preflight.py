"""What ``figures`` checks before anything heavy is imported: bad input refused in one line, exit 2, in well
under a second.

torch, papermill and the data layer take seconds to import; a typo should not wait for them. Everything here
reads files as text (a notebook's JSON, a config module's source, parsed with ``ast``) and the checks of
``experiments.knobs``, which import nothing heavy:

- the figures named, the profile, and ``--set NAME=VALUE`` (JSON values);
- each knob's name against the notebook's ``parameters`` cell, its value against the type of its config
  class's field (read from the source: ``static_fields``) and the knobs' ranges (finite, ≥ 1, choices);
- ``--time-budget``; the build folder, the run cache and ``out_dir`` writable.

The figure's config class still checks every value again when it is built (``knobs.configure``), with its
cross-field checks (``validate``), which need the heavy floors: a field whose type is not a plain one is left to
that check.
"""
from __future__ import annotations

import ast
import json
import tempfile
import types
from pathlib import Path

from replicate.core import paths, settings
from replicate.core.errors import ReplicateError
from replicate.experiments import catalog, knobs
from replicate.experiments.catalog import FigureNotebook

_PLAIN = {"int": int, "float": float, "str": str, "bool": bool}


def parse_value(text: str, name: str = "NAME"):
    """A --set value: JSON when it parses (numbers, null, lists), else the plain string; a value that opens
    a list or an object must be whole JSON (one line saying so, not a type error about text later)."""
    if text.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):  # every spelling, JSON's or not: one line
        raise ReplicateError(f"--set {name}={text}: must be a finite number")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if text.lstrip().startswith(("[", "{")):
            raise ReplicateError(f"--set {name}={text}: not a whole JSON list ({exc.msg} at character {exc.pos}); "
                                 f"write it as --set '{name}=[1, 5]'") from None
        return text


def overrides(items: list[str]) -> dict:
    """``--set NAME=VALUE`` items as a dict of values."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ReplicateError(f"--set expects NAME=VALUE, got {item!r}")
        out[name] = parse_value(value, name)
    return out


def declared(nb: FigureNotebook) -> list[str]:
    """The names its ``parameters`` cell assigns, in order (papermill's parameters)."""
    for cell in json.loads(nb.path.read_text())["cells"]:
        if cell["cell_type"] == "code" and "parameters" in cell.get("metadata", {}).get("tags", []):
            tree = ast.parse("".join(cell["source"]))
            return [target.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                    for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                    if isinstance(target, ast.Name)]
    raise ReplicateError(f"{nb.path.name} has no cell tagged 'parameters'")


def static_fields(key: str) -> tuple[dict, dict] | None:
    """(field name → type, class settings ``ZERO_ALLOWED``/``CHOICES``) of figure ``key``'s config class, read
    from its source and its bases' (None where a base cannot be read so: the full check alone decides)."""
    located = catalog.FIGURES.get(key)
    if not located:
        return None
    module, _, name = located.partition(":")
    fields, extra = {}, {}
    return (fields, extra) if _collect(module, name, fields, extra) else None


def _source(module: str) -> ast.Module | None:
    base = paths.REPO / Path(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return ast.parse(path.read_text())
    return None


def _collect(module: str, name: str, fields: dict, extra: dict) -> bool:
    tree = _source(module)
    if tree is None:
        return False
    package = module if (paths.REPO / Path(*module.split(".")) / "__init__.py").is_file() else module.rpartition(".")[0]
    imported = {a.asname or a.name: (_absolute(node, package), a.name) for node in tree.body
                if isinstance(node, ast.ImportFrom) and (node.module or node.level) for a in node.names}
    modules = {a.asname or a.name.split(".")[-1]: a.name for node in tree.body if isinstance(node, ast.Import)
               for a in node.names}
    found = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
    if found is None:  # re-exported (a package's face): follow its import
        return name in imported and _collect(*imported[name], fields, extra)
    for base in found.bases:  # the bases' fields come first, as a dataclass orders them
        text = ast.unparse(base)
        if text in ("object", "knobs.FigureConfig", "FigureConfig"):
            continue
        first = text.split(".")[0]
        if "." in text and (first in modules or first in imported):  # module.Class: `import m` or `from p import m`
            named = modules[first] if first in modules else ".".join(imported[first])
            where, _, cls = f"{named}.{text.split('.', 1)[1]}".rpartition(".")
        elif text in imported:
            where, cls = imported[text]
        elif "." not in text:
            where, cls = module, text
        else:
            return False
        if not _collect(where, cls, fields, extra):
            return False
    for node in found.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            annotation = ast.unparse(node.annotation)
            if annotation.startswith(("ClassVar", "typing.ClassVar")):
                if node.target.id in ("ZERO_ALLOWED", "CHOICES") and node.value is not None:
                    extra[node.target.id] = _literal(node.value)
                continue
            fields[node.target.id] = annotation
        elif isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] in (["ZERO_ALLOWED"],
                                                                                           ["CHOICES"]):
            extra[ast.unparse(node.targets[0])] = _literal(node.value)
    return True


def _absolute(node: ast.ImportFrom, package: str) -> str:
    """The module an ``ImportFrom`` names, relative ones (``from .board import X``) resolved in ``package``."""
    if not node.level:
        return node.module
    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
    return f"{base}.{node.module}" if node.module else base


def _literal(node):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def _hint(annotation: str):
    """A plain field type (int, float, str, bool, their tuples and optionals), or None for any other; read from
    the annotation's syntax, never evaluated."""
    try:
        return _type(ast.parse(annotation, mode="eval").body)
    except (SyntaxError, ValueError):
        return None


def _type(node):
    if isinstance(node, ast.Name) and node.id in _PLAIN:
        return _PLAIN[node.id]
    if isinstance(node, ast.Constant) and node.value is None:
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # X | None
        left, right = _type(node.left), _type(node.right)
        return (left if left is not None else type(None)) | (right if right is not None else type(None))
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "tuple":
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        args = tuple(... if isinstance(i, ast.Constant) and i.value is Ellipsis else _type(i) for i in items)
        if any(a is None for a in args):
            raise ValueError("not a plain type")
        return tuple[args]
    raise ValueError("not a plain type")


def check_knobs(nb: FigureNotebook, values: dict) -> None:
    """Each knob's name against the notebook, its value against its field's type and range."""
    names = declared(nb)
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ReplicateError(f"{nb.key} has no parameter(s) {', '.join(unknown)}; "
                             f"its parameters are: {', '.join(names)}")
    static = static_fields(nb.key)
    if static is None:
        return
    fields, extra = static
    stand_in = types.SimpleNamespace(__name__=catalog.FIGURES[nb.key].partition(":")[2],
                                     ZERO_ALLOWED=tuple(extra.get("ZERO_ALLOWED") or ()),
                                     CHOICES=dict(extra.get("CHOICES") or {}))
    for name, value in values.items():
        hint = _hint(fields[name]) if name in fields and value is not None else None
        if hint is not None:
            try:
                knobs._check(stand_in, name, hint, value)
            except ReplicateError as exc:
                raise ReplicateError(f"{nb.key}: {exc}") from None


def check(notebooks: list[FigureNotebook], profile: str, values: dict) -> None:
    """Every check of this module for a batch of ``notebooks`` at ``profile`` with knobs ``values``."""
    if profile not in knobs.PROFILES:
        raise ReplicateError(f"--profile must be one of {', '.join(knobs.PROFILES)}, got {profile!r}")
    knobs_only = {k: v for k, v in values.items() if k not in ("profile", "out_dir")}
    for nb in notebooks:
        try:
            check_knobs(nb, knobs_only)
        except ReplicateError as exc:
            if len(notebooks) == 1:
                raise
            raise ReplicateError(f"{exc} (--set applies to each of the {len(notebooks)} figures named, or to all when "
                                 "none is: name the figures it is for)") from None
    current = settings.current()
    folders = [(current.build, "the build folder (REPLICATE_BUILD)"),
               (current.cache, "the run cache (REPLICATE_CACHE)")]
    if values.get("out_dir"):
        out_dir = Path(values["out_dir"])
        if paths.within(out_dir, paths.figures_dir()) and not (profile == "paper" and paths.labelled_folder(out_dir)):
            # only a plain paper-profile run, or a labelled command of report.reduced, writes there (the batch
            # runner checks that the figures are the ones listed)
            raise paths.committed_figures_refused(out_dir)
        folders.append((out_dir, "out_dir"))
    for folder, what in folders:
        try:
            _writable(Path(folder))
        except OSError as exc:
            raise ReplicateError(f"cannot write into {folder}: {exc.strerror or exc}: {what} must be a folder you "
                                 "can write; point it elsewhere") from None


def _writable(folder: Path) -> None:
    """Whether a file can be written in ``folder`` (an ``OSError`` if not), trying it for real (a permission bit
    says nothing for root, nor of a read-only mount), and leaving nothing behind: the folders made for the try
    are removed, so a refused command leaves the machine as it was."""
    missing, existing = [], folder.absolute()
    while not existing.exists():
        missing.append(existing)
        existing = existing.parent
    made = []
    try:
        for path in reversed(missing):
            path.mkdir()
            made.append(path)
        with tempfile.TemporaryFile(dir=folder):
            pass
    finally:
        for path in reversed(made):
            path.rmdir()


__all__ = ["check", "check_knobs", "declared", "overrides", "parse_value", "static_fields"]
