"""The structure of the `kerasbatch` package, measured from its source.

Reads every module of `<root>/kerasbatch` with `ast` (nothing is imported,
so it runs in a second without TensorFlow or Keras) and reports:

1. the import graph: every `import` / `from ... import` of a kerasbatch
   module, at module level (anywhere that runs on import: the module's body,
   `if` / `try` blocks, class bodies) and "deferred" (inside a function), and
   `importlib.import_module("kerasbatch....")` calls with a literal name.
   `from kerasbatch import x` is an edge to `kerasbatch.x` where `x` is a
   module or subpackage, else to `kerasbatch` (its `__init__`); relative
   imports are resolved. A package's `__init__.py` is the module named after
   the package. An edge goes to the module named only, not to the parent
   packages Python also runs on the way; a module importing itself (a package
   `__init__` reading its own names) is not an edge;
2. import cycles: the strongly connected components of more than one module,
   of the module-level graph, and of the graph with the deferred imports too;
3. upward imports by the LAYERS table below, and engines importing builders
   (each counted once per importer and imported module, with its lines);
4. the modules that import TensorFlow: `import tensorflow`, `from kerasbatch
   .optional import tensorflow` (it binds the lazy module, whose first
   attribute read imports TensorFlow), or an attribute read
   `optional.tensorflow` (`.load()`, `.available` and any other attribute
   import it); `optional.imported("tensorflow")` imports nothing and is not
   counted;
5. the modules that import keras directly;
6. sizes: modules over 600 lines, classes over 400 lines, counts;
7. engine-name comparisons outside `kerasbatch/engines/`: `==`, `!=`, `in`,
   `not in` with the literal "tf.data", "grain" or "python" on one side (or
   in a tuple, list or set of strings there);
8. the `duplicates` tool's count of pairs of places sharing 6+ lines.

Run from anywhere:

    python benchmarks/layout.py                        # this checkout
    python benchmarks/layout.py --root /path/to/repo   # another checkout
    python benchmarks/layout.py --json                 # the same, as JSON
"""

import argparse
import ast
import json
import pathlib
import re
import shutil
import subprocess
import sys

PACKAGE = "kerasbatch"

#: The layers, lowest first: (name, module prefixes). A prefix matches the
#: module of that name and every module below it, the longest prefix
#: winning; the package itself ("kerasbatch") matches its `__init__` only.
#: A module no prefix matches is "unlayered".
LAYERS = [
    ("base", ("kerasbatch.config", "kerasbatch.checks", "kerasbatch.optional")),
    (
        "planning",
        (
            "kerasbatch.planning",
            "kerasbatch.plan",
            "kerasbatch.orders",
            "kerasbatch.remainders",
            "kerasbatch.boundaries",
            "kerasbatch.buckets",
            "kerasbatch.packing",
            "kerasbatch.batching",
            "kerasbatch.costs",
            "kerasbatch.chunking",
            "kerasbatch.lengths",
        ),
    ),
    (
        "data",
        (
            "kerasbatch.data",
            "kerasbatch.sources",
            "kerasbatch.padding",
            "kerasbatch.outputs",
            "kerasbatch.model_inputs",
            "kerasbatch.reducers",
        ),
    ),
    ("engines", ("kerasbatch.engines", "kerasbatch.epochs")),
    ("builders", ("kerasbatch.builders",)),
    ("layers", ("kerasbatch.layers", "kerasbatch.losses")),
    ("callbacks", ("kerasbatch.callbacks",)),
    ("io", ("kerasbatch.io",)),
    (
        "tools",
        (
            "kerasbatch.tools",
            "kerasbatch.analysis",
            "kerasbatch.restore",
            "kerasbatch.plotting",
            "kerasbatch.demo",
            "kerasbatch.prediction",
        ),
    ),
    ("tuner", ("kerasbatch.tuner",)),
    ("top", ("kerasbatch", "kerasbatch.__main__")),
]

#: Where TensorFlow is expected: these modules (and those below them) are
#: left out of the summary's count of modules importing TensorFlow.
TENSORFLOW_HOMES = ("kerasbatch.engines.tf_data", "kerasbatch.io", "kerasbatch.layers")
ENGINES = "kerasbatch.engines"
BUILDERS = "kerasbatch.builders"
ENGINE_NAMES = ("tf.data", "grain", "python")
MODULE_LINES = 600
CLASS_LINES = 400
DUPLICATE_LINES = 6

MODULE_LEVEL = "module"
DEFERRED = "deferred"


def under(name, prefix):
    """Whether module `name` is `prefix` or a module below it."""
    return name == prefix or name.startswith(prefix + ".")


def layer_of(name):
    """(index, layer name) of a module by LAYERS, or (None, "unlayered")."""
    best = None
    for index, (layer, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = name == prefix if prefix == PACKAGE else under(name, prefix)
            if matches and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index, layer)
    return (best[1], best[2]) if best else (None, "unlayered")


# -- reading the package ------------------------------------------------------


def find_modules(package_dir):
    """{module name: path} for every .py file of the package."""
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def is_package(name, modules):
    return modules.get(name) is not None and modules[name].name == "__init__.py"


class ModuleVisitor(ast.NodeVisitor):
    """Collects one module's imports, TensorFlow and keras uses, classes and
    engine-name comparisons, each marked module level or deferred."""

    def __init__(self, name, modules):
        self.name = name
        self.modules = modules
        self.depth = 0  # how many functions deep
        self.imports = []  # (target, level, line)
        self.dynamic = []  # (text, level, line): unresolved import_module calls
        self.tensorflow = []  # (how, level, line)
        self.keras = []  # (statement, level, line)
        self.classes = []  # (qualified name, lines, line)
        self.comparisons = []  # (line, source)
        self.optional_names = set()  # names bound to kerasbatch.optional
        self.class_stack = []

    @property
    def level(self):
        return DEFERRED if self.depth else MODULE_LEVEL

    # scopes

    def visit_FunctionDef(self, node):
        for child in node.decorator_list + [node.args]:
            self.visit(child)  # run on import where the def is module level
        if node.returns is not None:
            self.visit(node.returns)
        self.depth += 1
        for statement in node.body:
            self.visit(statement)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        self.visit(node.args)
        self.depth += 1
        self.visit(node.body)
        self.depth -= 1

    def visit_ClassDef(self, node):
        qualified = ".".join(self.class_stack + [node.name])
        self.classes.append((qualified, node.end_lineno - node.lineno + 1, node.lineno))
        self.class_stack.append(node.name)
        self.generic_visit(node)
        self.class_stack.pop()

    # imports

    def package(self):
        """The package a relative import starts from."""
        if is_package(self.name, self.modules):
            return self.name
        return self.name.rpartition(".")[0]

    def absolute(self, module, level):
        if not level:
            return module
        base = self.package().split(".")
        if level > 1:
            base = base[: -(level - 1)]
        return ".".join(base + ([module] if module else []))

    def add_import(self, target, line):
        if target != self.name:
            self.imports.append((target, self.level, line))

    def visit_Import(self, node):
        for alias in node.names:
            if under(alias.name, PACKAGE):
                self.add_import(alias.name, node.lineno)
                if alias.name == "kerasbatch.optional" and alias.asname:
                    self.optional_names.add(alias.asname)
            if under(alias.name, "tensorflow"):
                self.tensorflow.append(
                    (f"import {alias.name}", self.level, node.lineno)
                )
            if under(alias.name, "keras"):
                self.keras.append((f"import {alias.name}", self.level, node.lineno))

    def visit_ImportFrom(self, node):
        module = self.absolute(node.module, node.level)
        names = [alias.name for alias in node.names]
        if under(module, PACKAGE):
            targets = []
            for alias in node.names:
                child = f"{module}.{alias.name}"
                if child in self.modules:
                    targets.append(child)
                    if child == "kerasbatch.optional":
                        self.optional_names.add(alias.asname or alias.name)
                else:
                    targets.append(module)
            for target in dict.fromkeys(targets):
                self.add_import(target, node.lineno)
            if module == "kerasbatch.optional" and "tensorflow" in names:
                self.tensorflow.append(
                    (
                        "from kerasbatch.optional import tensorflow",
                        self.level,
                        node.lineno,
                    )
                )
        if under(module, "tensorflow"):
            self.tensorflow.append(
                (f"from {module} import ...", self.level, node.lineno)
            )
        if under(module, "keras"):
            self.keras.append((f"from {module} import ...", self.level, node.lineno))

    def visit_Call(self, node):
        function = node.func
        called = (
            function.attr
            if isinstance(function, ast.Attribute)
            else getattr(function, "id", None)
        )
        if called == "import_module" and node.args:
            argument = node.args[0]
            if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                if under(argument.value, PACKAGE):
                    self.add_import(argument.value, node.lineno)
                if under(argument.value, "tensorflow"):
                    self.tensorflow.append(
                        (f"import_module({argument.value!r})", self.level, node.lineno)
                    )
            else:
                self.dynamic.append((ast.unparse(argument), self.level, node.lineno))
        self.generic_visit(node)

    def visit_Attribute(self, node):
        if node.attr == "tensorflow":
            value = node.value
            if (isinstance(value, ast.Name) and value.id in self.optional_names) or (
                ast.unparse(value) == "kerasbatch.optional"
            ):
                self.tensorflow.append(
                    (f"{ast.unparse(value)}.tensorflow", self.level, node.lineno)
                )
        self.generic_visit(node)

    # engine names

    def visit_Compare(self, node):
        operators = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)
        if any(isinstance(op, operators) for op in node.ops):
            sides = [node.left] + list(node.comparators)
            if any(names_engine(side) for side in sides):
                self.comparisons.append((node.lineno, ast.unparse(node)))
        self.generic_visit(node)


def names_engine(node):
    """Whether an expression is an engine-name literal, or a tuple, list or
    set of string literals holding one."""
    if isinstance(node, ast.Constant):
        return node.value in ENGINE_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(
            isinstance(element, ast.Constant) and element.value in ENGINE_NAMES
            for element in node.elts
        )
    return False


def read_package(root):
    """Everything measured of each module: {name: record}."""
    package_dir = root / PACKAGE
    if not (package_dir / "__init__.py").exists():
        sys.exit(f"no package at {package_dir}")
    modules = find_modules(package_dir)
    # Optional names bound by `from kerasbatch import optional` are found in
    # the visit of the import; a first pass finds them all, so that a read
    # that comes first in the file is seen too.
    records = {}
    for name, path in modules.items():
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(path))
        first = ModuleVisitor(name, modules)
        first.visit(tree)
        visitor = ModuleVisitor(name, modules)
        visitor.optional_names = set(first.optional_names)
        visitor.visit(tree)
        records[name] = {
            "path": path.relative_to(root).as_posix(),
            "lines": text.count("\n"),
            "visitor": visitor,
        }
    return records


# -- the graph ----------------------------------------------------------------


def edges_of(records, levels):
    """{importer: {imported: [lines]}} for the imports at these levels."""
    graph = {name: {} for name in records}
    for name, record in records.items():
        for target, level, line in record["visitor"].imports:
            if level in levels:
                graph[name].setdefault(target, []).append(line)
    return graph


def strongly_connected(graph):
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return sorted(components, key=lambda component: (-len(component), component))


def shortest_cycle(graph, component):
    """One shortest cycle inside a component, as a list of modules."""
    members = set(component)
    best = None
    for start in component:
        parents = {start: None}
        queue = [start]
        found = None
        while queue and found is None:
            following = []
            for node in queue:
                for successor in sorted(graph.get(node, ())):
                    if successor not in members:
                        continue
                    if successor == start:
                        found = node
                        break
                    if successor not in parents:
                        parents[successor] = node
                        following.append(successor)
                if found is not None:
                    break
            queue = following
        if found is None:
            continue
        path = [found]
        while parents[path[-1]] is not None:
            path.append(parents[path[-1]])
        cycle = list(reversed(path)) + [start]
        if best is None or len(cycle) < len(best):
            best = cycle
    return best


def cycles_of(graph):
    return [
        {
            "modules": component,
            "internal_edges": sum(
                1 for a in component for b in graph[a] if b in set(component)
            ),
            "example": shortest_cycle(graph, component),
        }
        for component in strongly_connected(graph)
    ]


# -- the measures -------------------------------------------------------------


def run_duplicates(package_dir):
    """The `duplicates` tool's pairs of 6+ shared lines under kerasbatch/."""
    # `duplicates --repo DIR` reads the files under DIR (in a git checkout,
    # the tracked and the untracked-not-ignored ones), so it can be pointed
    # at any checkout's kerasbatch/.
    tool = shutil.which("duplicates")
    if tool is None:
        return {"pairs": None, "note": "the duplicates command is not on PATH"}
    command = [
        tool,
        "--repo",
        str(package_dir),
        "--min-lines",
        str(DUPLICATE_LINES),
        "--most",
        "1",
        "--seconds",
        "120",
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = result.stdout.splitlines()
    head = lines[0] if lines else ""
    pairs = None
    match = re.match(r"(\d+) pairs?\b", head)
    if match:
        pairs = int(match.group(1))
    elif head.startswith("no duplicates"):
        pairs = 0
    notes = [line for line in lines if line.startswith(("incomplete:", "left out:"))]
    return {
        "pairs": pairs,
        "line": head,
        "notes": notes,
        "command": " ".join(["duplicates"] + command[1:]),
    }


def measure(root):
    records = read_package(root)
    names = sorted(records)
    module_graph = edges_of(records, {MODULE_LEVEL})
    full_graph = edges_of(records, {MODULE_LEVEL, DEFERRED})

    imports = {}
    for name in names:
        visitor = records[name]["visitor"]
        imports[name] = [
            {"module": target, "level": level, "line": line}
            for target, level, line in visitor.imports
        ]
    edge_pairs = {
        level: sorted(
            {
                (name, edge["module"])
                for name in names
                for edge in imports[name]
                if edge["level"] == level
            }
        )
        for level in (MODULE_LEVEL, DEFERRED)
    }

    def edge_list(predicate):
        found = {MODULE_LEVEL: [], DEFERRED: []}
        for level, pairs in edge_pairs.items():
            for importer, imported in pairs:
                if predicate(importer, imported):
                    found[level].append(
                        {
                            "importer": importer,
                            "imported": imported,
                            "importer_layer": layer_of(importer)[1],
                            "imported_layer": layer_of(imported)[1],
                            "where": [
                                f"{records[importer]['path']}:{edge['line']}"
                                for edge in imports[importer]
                                if edge["module"] == imported and edge["level"] == level
                            ],
                        }
                    )
        return found

    def upward(importer, imported):
        low, high = layer_of(importer)[0], layer_of(imported)[0]
        return low is not None and high is not None and high > low

    def engine_to_builders(importer, imported):
        return under(importer, ENGINES) and under(imported, BUILDERS)

    tensorflow = {}
    keras = {}
    for name in names:
        visitor = records[name]["visitor"]
        for attribute, store in (("tensorflow", tensorflow), ("keras", keras)):
            uses = getattr(visitor, attribute)
            if uses:
                store[name] = {
                    "module_level": any(level == MODULE_LEVEL for _, level, _ in uses),
                    "uses": [
                        {
                            "how": how,
                            "level": level,
                            "where": f"{records[name]['path']}:{line}",
                        }
                        for how, level, line in uses
                    ],
                }
    tensorflow_outside = sorted(
        name
        for name in tensorflow
        if not any(under(name, home) for home in TENSORFLOW_HOMES)
    )

    classes = [
        {
            "class": f"{name}.{qualified}",
            "lines": lines,
            "where": f"{records[name]['path']}:{line}",
        }
        for name in names
        for qualified, lines, line in records[name]["visitor"].classes
    ]
    big_classes = sorted(
        (entry for entry in classes if entry["lines"] > CLASS_LINES),
        key=lambda entry: -entry["lines"],
    )
    big_modules = sorted(
        (
            {
                "module": name,
                "lines": records[name]["lines"],
                "path": records[name]["path"],
            }
            for name in names
            if records[name]["lines"] > MODULE_LINES
        ),
        key=lambda entry: -entry["lines"],
    )
    flat = sorted(path.name for path in (root / PACKAGE).glob("*.py"))

    comparisons = [
        {"where": f"{records[name]['path']}:{line}", "code": code}
        for name in names
        if not under(name, ENGINES)
        for line, code in records[name]["visitor"].comparisons
    ]

    dynamic = [
        {"where": f"{records[name]['path']}:{line}", "level": level, "argument": text}
        for name in names
        for text, level, line in records[name]["visitor"].dynamic
    ]
    missing = sorted(
        {edge["module"] for name in names for edge in imports[name]} - set(records)
    )

    module_cycles = cycles_of(module_graph)
    full_cycles = cycles_of(full_graph)
    upward_imports = edge_list(upward)
    engine_builders = edge_list(engine_to_builders)
    duplicates = run_duplicates(root / PACKAGE)

    summary = {
        "cycles (module level)": len(module_cycles),
        "modules in cycles (module level)": sum(
            len(c["modules"]) for c in module_cycles
        ),
        "cycles (with deferred)": len(full_cycles),
        "modules in cycles (with deferred)": sum(
            len(c["modules"]) for c in full_cycles
        ),
        "upward imports (module level)": len(upward_imports[MODULE_LEVEL]),
        "upward imports (deferred)": len(upward_imports[DEFERRED]),
        "engines -> builders imports (module level)": len(
            engine_builders[MODULE_LEVEL]
        ),
        "engines -> builders imports (deferred)": len(engine_builders[DEFERRED]),
        "modules importing TensorFlow outside engines.tf_data, io, layers": len(
            tensorflow_outside
        ),
        "  of which at module level": sum(
            1 for name in tensorflow_outside if tensorflow[name]["module_level"]
        ),
        f"modules > {MODULE_LINES} lines": len(big_modules),
        f"classes > {CLASS_LINES} lines": len(big_classes),
        "engine-name comparisons outside engines/": len(comparisons),
        f"duplicate pairs ({DUPLICATE_LINES}+ lines)": duplicates["pairs"],
    }
    return {
        "root": str(root),
        "summary": summary,
        "counts": {
            "modules": len(names),
            "classes": len(classes),
            "files directly in kerasbatch/": len(flat),
            "lines": sum(record["lines"] for record in records.values()),
            "import edges (module level)": len(edge_pairs[MODULE_LEVEL]),
            "import edges (deferred)": len(edge_pairs[DEFERRED]),
            "imports, by statement and module (module level)": sum(
                1
                for name in names
                for edge in imports[name]
                if edge["level"] == MODULE_LEVEL
            ),
            "imports, by statement and module (deferred)": sum(
                1
                for name in names
                for edge in imports[name]
                if edge["level"] == DEFERRED
            ),
            "modules importing TensorFlow": len(tensorflow),
            "modules importing keras": len(keras),
        },
        "layers": [
            {"layer": layer, "prefixes": list(prefixes)} for layer, prefixes in LAYERS
        ],
        "unlayered": [name for name in names if layer_of(name)[0] is None],
        "cycles": {"module_level": module_cycles, "with_deferred": full_cycles},
        "upward_imports": upward_imports,
        "engines_import_builders": engine_builders,
        "tensorflow": tensorflow,
        "tensorflow_outside_homes": tensorflow_outside,
        "keras": keras,
        "big_modules": big_modules,
        "big_classes": big_classes,
        "flat_files": flat,
        "engine_name_comparisons": comparisons,
        "duplicates": duplicates,
        "unresolved_dynamic_imports": dynamic,
        "missing_modules": missing,
        "imports": imports,
    }


# -- the report ---------------------------------------------------------------


def table(rows, headers):
    widths = [
        max(len(str(row[i])) for row in rows + [headers]) for i in range(len(headers))
    ]
    lines = [
        "| "
        + " | ".join(
            str(cell).ljust(width) for cell, width in zip(headers, widths, strict=True)
        )
        + " |",
        "|" + "|".join("-" * (width + 2) for width in widths) + "|",
    ]
    for row in rows:
        lines.append(
            "| "
            + " | ".join(
                str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)
            )
            + " |"
        )
    return "\n".join(lines)


def report(result):
    out = [f"kerasbatch package layout: {result['root']}", ""]
    out.append(
        table(
            [(key, value) for key, value in result["summary"].items()],
            ("measure", "value"),
        )
    )
    out.append("")
    out.append(", ".join(f"{key}: {value}" for key, value in result["counts"].items()))

    def section(title):
        out.extend(["", f"== {title}"])

    for key, title in (
        ("module_level", "module-level imports"),
        ("with_deferred", "with deferred imports"),
    ):
        section(f"Import cycles, {title}")
        cycles = result["cycles"][key]
        if not cycles:
            out.append("  none")
        for number, cycle in enumerate(cycles, 1):
            out.append(
                f"  {number}. {len(cycle['modules'])} modules, "
                f"{cycle['internal_edges']} edges inside; a shortest cycle: "
                + " -> ".join(cycle["example"])
            )
            out.append("     " + ", ".join(cycle["modules"]))

    for level in (MODULE_LEVEL, DEFERRED):
        section(f"Upward imports ({level} level)")
        entries = result["upward_imports"][level]
        if not entries:
            out.append("  none")
        for entry in entries:
            out.append(
                f"  {entry['importer']} [{entry['importer_layer']}] -> "
                f"{entry['imported']} [{entry['imported_layer']}]  "
                + ", ".join(entry["where"])
            )
    if result["unlayered"]:
        out.append("  unlayered (not judged): " + ", ".join(result["unlayered"]))

    section("Engines importing builders")
    for level in (MODULE_LEVEL, DEFERRED):
        entries = result["engines_import_builders"][level]
        out.append(f"  {level} level: {len(entries)}")
        for entry in entries:
            out.append(
                f"    {entry['importer']} -> {entry['imported']}  "
                + ", ".join(entry["where"])
            )

    for key, title in (("tensorflow", "TensorFlow"), ("keras", "keras (directly)")):
        section(f"Modules importing {title}: {len(result[key])}")
        for name, entry in result[key].items():
            flag = ""
            if key == "tensorflow" and name in result["tensorflow_outside_homes"]:
                flag = "  (outside engines.tf_data, io, layers)"
            out.append(
                f"  {name}{flag}: "
                + "; ".join(
                    f"{use['how']} ({use['level']}, {use['where']})"
                    for use in entry["uses"]
                )
            )

    section("Sizes")
    out.append(f"  modules > {MODULE_LINES} lines: {len(result['big_modules'])}")
    for entry in result["big_modules"]:
        out.append(f"    {entry['lines']:5d}  {entry['path']}")
    out.append(f"  classes > {CLASS_LINES} lines: {len(result['big_classes'])}")
    for entry in result["big_classes"]:
        out.append(f"    {entry['lines']:5d}  {entry['class']}  ({entry['where']})")
    out.append(
        f"  files directly in kerasbatch/: {len(result['flat_files'])}: "
        + ", ".join(result["flat_files"])
    )

    section(
        f"Engine-name comparisons outside engines/: {len(result['engine_name_comparisons'])}"
    )
    for entry in result["engine_name_comparisons"]:
        out.append(f"  {entry['where']}: {entry['code']}")

    section("Duplicates")
    duplicates = result["duplicates"]
    out.append(f"  {duplicates.get('command', '')}")
    out.append(f"  {duplicates.get('line') or duplicates.get('note')}")
    for note in duplicates.get("notes", []):
        out.append(f"  {note}")

    if result["unresolved_dynamic_imports"] or result["missing_modules"]:
        section("Not resolved")
        for entry in result["unresolved_dynamic_imports"]:
            out.append(
                f"  import_module({entry['argument']}) ({entry['level']}, {entry['where']})"
            )
        for name in result["missing_modules"]:
            out.append(f"  imported but no such module: {name}")

    section("Import graph (kerasbatch modules each module imports)")
    for name, edges in result["imports"].items():
        if not edges:
            continue
        targets = {}
        for edge in edges:
            targets.setdefault((edge["module"], edge["level"]), True)
        now = sorted(target for target, level in targets if level == MODULE_LEVEL)
        later = sorted(target for target, level in targets if level == DEFERRED)
        line = f"  {name} [{layer_of(name)[1]}]: " + ", ".join(now)
        if later:
            line += ("; " if now else "") + "deferred: " + ", ".join(later)
        out.append(line)
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--root",
        type=pathlib.Path,
        default=pathlib.Path(__file__).resolve().parent.parent,
        help="the repository whose kerasbatch/ is measured (default: this checkout)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    result = measure(args.root.resolve())
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(report(result))


if __name__ == "__main__":
    main()
