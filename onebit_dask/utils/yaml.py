"""Reading the package's YAML files (sweep specs, cluster configs) strictly.

``yaml.safe_load`` takes the last of two equal keys and turns ``d1:`` into ``None``;
:func:`load_yaml` refuses both, and says which file, line and key. Bytes that are
not UTF-8 and YAML errors (a tab in the indentation, say) name the file and line.
"""

from __future__ import annotations

import os

import yaml

from .limits import MAX_YAML_VALUES


class YamlError(ValueError):
    """A YAML file that cannot be read as written; the message names file, line and key."""


class _StrictLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses a key given twice in one mapping."""


def _mapping(loader, node, deep=False):
    seen = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            raise YamlError(f"line {key_node.start_mark.line + 1}: a key must be a scalar, "
                            f"not {key!r}") from None
        if key in seen:
            raise YamlError(f"line {key_node.start_mark.line + 1}: key {key!r} is given twice "
                            f"(first on line {seen[key] + 1}): give it once")
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


def _int(loader, node):
    """YAML's integer, or a :class:`YamlError` naming the line for one Python cannot
    convert (more digits than ``sys.get_int_max_str_digits()``)."""
    try:
        return yaml.SafeLoader.construct_yaml_int(loader, node)
    except ValueError:
        raise YamlError(f"line {node.start_mark.line + 1}: the number "
                        f"{node.value[:20]}... has {len(node.value)} characters: a number "
                        "this long is no size or count; give a smaller one") from None


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _int)


def _expanded_values(value, limit: int) -> int:
    """How many values ``value`` holds with its aliases expanded, counted in time linear
    in its distinct nodes (an alias is the same Python object, counted once and reused);
    stops past ``limit``."""
    sizes: dict = {}

    def size(v) -> int:
        if not isinstance(v, (dict, list)):
            return 1
        if id(v) not in sizes:
            total = 1
            for item in (v.values() if isinstance(v, dict) else v):
                total += size(item)
                if total > limit:
                    break
            sizes[id(v)] = total
        return sizes[id(v)]

    return size(value)


def _nulls(value, path=""):
    """The dotted key paths of the ``None`` values in ``value``."""
    if value is None:
        return [path or "<document>"]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _nulls(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _nulls(v, f"{path}[{i}]")]
    return []


def parse_yaml(text: str, where: str, *, nulls: bool = False):
    """Parse YAML ``text`` from the file ``where``: duplicate keys refused, and null values
    unless ``nulls``.

    Raises
    ------
    YamlError
        Naming ``where``, the line and the key.
    """
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except YamlError as exc:
        raise YamlError(f"{where}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}, column {mark.column + 1}:" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        hint = " (YAML indents with spaces, not tabs)" if "\\t" in problem or "tab" in problem \
            else ""
        raise YamlError(f"{where}:{line} not valid YAML: {problem}{hint}") from None
    if _expanded_values(data, MAX_YAML_VALUES) > MAX_YAML_VALUES:
        raise YamlError(f"{where}: its aliases (*name) expand to more than "
                        f"{MAX_YAML_VALUES:,} values: write the values out, or use fewer "
                        "nested aliases")
    missing = [] if nulls or data is None else _nulls(data)
    if missing:
        raise YamlError(f"{where}: {missing[0]} has no value (null): give a value or leave "
                        "the key out")
    return data


def read_text(path) -> str:
    """The text of the file at ``path``, which must be UTF-8 (:class:`YamlError` naming the
    line otherwise)."""
    path = os.fspath(path)
    with open(path, "rb") as fh:
        raw = fh.read()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise YamlError(f"{path}: line {line}: byte {raw[exc.start]:#04x} is not UTF-8: save "
                        "the file as UTF-8") from None


def load_yaml(path, *, nulls: bool = False):
    """Read and parse the YAML file at ``path`` (see :func:`parse_yaml`)."""
    return parse_yaml(read_text(path), os.fspath(path), nulls=nulls)
