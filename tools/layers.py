#!/usr/bin/env python3
"""tools/layers.py [ROOT] | --self-test: checks the includes that no include path can check.

Each layer's private include root keeps the layers apart in the build (docs/design/layers.md),
and tests/compile_fail proves it. Three rules are left that the compiler cannot see, because
the code that would break them compiles:

  1. A public header includes only public headers of its own layer or the layers below it
     (every public root is on a user's path, so <eddy/net/...> from a runtime header would
     compile and quietly turn the layers upside down).
  2. Inside io/, the folders share one library and one private root: reactor/ and time/ (the
     driver) name nothing of net/, fs/, streams/ or process/, public or private; fs/, streams/
     and process/ name no private header of net/.
  3. No source reaches another folder through a relative path ("../runtime/worker.hpp").

Prints each violation as FILE:LINE: message, and exits 1 if there is any. --self-test
builds a small tree with one violation of each kind in a temporary directory and exits 0 only
if each one is reported (and a clean tree passes).
"""
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')

# Public include prefixes by layer, bottom up; a layer may include its own and those below.
LAYERS = [
    ("tasks", ["eddy/tasks/"]),
    ("runtime", ["eddy/runtime/"]),
    ("sync", ["eddy/sync/"]),
    ("io", ["eddy/io/", "eddy/time/", "eddy/net/", "eddy/fs/", "eddy/process/", "eddy/eddy.hpp",
            "eddy/config.hpp"]),
    ("tls", ["eddy/tls/"]),
]
# Where each layer's public headers live (source-relative).
PUBLIC_ROOTS = {
    "tasks": ["tasks/include"],
    "runtime": ["runtime/include"],
    "sync": ["runtime/sync/include"],
    "io": ["io/include", "io/reactor/include", "io/time/include", "io/net/include", "io/fs/include",
           "io/streams/include", "io/process/include"],
    "tls": ["io/tls/include"],
}
# The io/ concepts: their folders, and the public prefixes they own.
IO_CONCEPTS = {
    "reactor": ("io/reactor/", ["eddy/io/detail/io_awaiter.hpp", "eddy/io/detail/operation.hpp",
                                "eddy/io/detail/nested_await.hpp", "eddy/io/detail/poll_waiter.hpp"]),
    "time": ("io/time/", ["eddy/time/"]),
    "net": ("io/net/", ["eddy/net/"]),
    "fs": ("io/fs/", ["eddy/fs/"]),
    "streams": ("io/streams/", []),  # <eddy/io/...> other than the reactor's detail headers
    "process": ("io/process/", ["eddy/process/"]),
}
DRIVER = {"reactor", "time"}


def layer_of_include(name):
    for i, (layer, prefixes) in enumerate(LAYERS):
        if any(name.startswith(p) for p in prefixes):
            return i
    return None


def io_concept_of_public(name):
    for concept, (_, prefixes) in IO_CONCEPTS.items():
        if any(name.startswith(p) for p in prefixes):
            return concept
    if name.startswith("eddy/io/"):
        return "streams"
    return None


def includes(path):
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = INCLUDE.match(line)
        if m:
            yield n, m.group(1), m.group(2)


def check(root):
    problems = []
    sources = [p for d in ("tasks", "runtime", "io") for p in (root / d).rglob("*")
               if p.suffix in (".hpp", ".cpp", ".in") and p.is_file()]
    # Rule 1: public headers.
    for index, (layer, _) in enumerate(LAYERS):
        for sub in PUBLIC_ROOTS[layer]:
            for header in sorted((root / sub).rglob("*.hpp")):
                if header.name == "eddy.hpp":
                    continue  # the umbrella header: the top of every layer
                for n, kind, name in includes(header):
                    if kind == '"':
                        problems.append((header, n, f'a public header includes "{name}" (private)'))
                        continue
                    other = layer_of_include(name)
                    if other is not None and other > index:
                        problems.append((header, n, f"a {layer} header includes <{name}>, of the layer above "
                                                    f"({LAYERS[other][0]})"))
    for path in sorted(sources):
        rel = path.relative_to(root).as_posix()
        concept = next((c for c, (folder, _) in IO_CONCEPTS.items() if rel.startswith(folder)), None)
        for n, kind, name in includes(path):
            # Rule 3.
            if kind == '"' and name.startswith(".."):
                problems.append((path, n, f'"{name}" reaches another folder by a relative path'))
            # Rule 2.
            if concept is None:
                continue
            if kind == '"':
                target = name.split("/", 1)[0] if "/" in name else None
                if concept in DRIVER and target in ("net", "fs", "streams", "process"):
                    problems.append((path, n, f'io/{concept}/ includes "{name}": the driver names nothing of {target}/'))
                elif concept in ("fs", "streams", "process") and target == "net":
                    problems.append((path, n, f'io/{concept}/ includes "{name}", a private header of net/'))
            elif concept in DRIVER:
                target = io_concept_of_public(name)
                if target in ("net", "fs", "streams", "process"):
                    problems.append((path, n, f"io/{concept}/ includes <{name}>: the driver names nothing of {target}/"))
    return problems


def self_test():
    import tempfile
    clean = {
        "tasks/include/eddy/tasks/task.hpp": "#include <eddy/tasks/detail/promise.hpp>\n",
        "runtime/include/eddy/runtime/spawn.hpp": "#include <eddy/tasks/task.hpp>\n",
        "io/reactor/reactor.cpp": '#include "reactor/reactor.hpp"\n#include "time/timer_queue.hpp"\n',
        "io/net/tcp.cpp": '#include "net/socket_util.hpp"\n#include "reactor/reactor.hpp"\n',
        "io/include/eddy/eddy.hpp": "#include <eddy/tls/stream.hpp>\n",
    }
    bad = {
        "runtime/include/eddy/runtime/bad.hpp": ("#include <eddy/net/tcp_stream.hpp>\n", "of the layer above (io)"),
        "tasks/include/eddy/tasks/bad.hpp": ('#include "private.hpp"\n', "(private)"),
        "io/reactor/bad.cpp": ('#include "net/socket_util.hpp"\n', "the driver names nothing of net/"),
        "io/time/bad.cpp": ("#include <eddy/io/buf_reader.hpp>\n", "the driver names nothing of streams/"),
        "io/fs/bad.cpp": ('#include "net/socket_util.hpp"\n', "a private header of net/"),
        "runtime/bad.cpp": ('#include "../io/reactor/reactor.hpp"\n', "by a relative path"),
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        for rel, text in clean.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        if check(root):
            print("self-test: the clean tree has problems:", check(root))
            return 1
        for rel, (text, _) in bad.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        found = {(p.relative_to(root).as_posix(), m) for p, _, m in check(root)}
        missed = [rel for rel, (_, want) in bad.items() if not any(f == rel and want in m for f, m in found)]
        if missed or len(found) != len(bad):
            print("self-test: missed", missed, "found", sorted(found))
            return 1
    print(f"tools/layers.py --self-test: {len(bad)} violations reported, the clean tree passes")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    root = pathlib.Path(argv[1] if len(argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    problems = check(root)
    for path, n, message in problems:
        print(f"{path.relative_to(root)}:{n}: {message}")
    print(f"tools/layers.py: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
