#!/usr/bin/env python3
"""Validate OpenLineage RunEvents (JSON lines) offline against the OpenLineage JSON schemas.

Usage: validate-openlineage.py EVENTS.jsonl [--spec-dir DIR] [--strict]

Each non-blank line must be one RunEvent. It is validated against
OpenLineage.json#/$defs/RunEvent, then every facet it carries (run.facets,
job.facets, inputs[].facets, inputs[].inputFacets, outputs[].facets,
outputs[].outputFacets) is validated against its own facet schema, chosen by the
facet's `_schemaURL` (or, if that file is not vendored, by the facet's key).
All `$ref`s are resolved from a local registry built from the schema files in
--spec-dir (default: $OPENLINEAGE_SPEC_DIR, else ./openlineage-spec next to this
script, a copy of spec/OpenLineage.json and spec/facets/*.json from
github.com/OpenLineage/OpenLineage). Nothing is fetched from the network.

Prints one "ok ..." line per event; on the first error prints the line number,
the JSON path and the message, and exits 1. Custom (non-standard) facets are
only checked against BaseFacet (`_producer`, `_schemaURL`). With --strict, a
facet or event whose `_schemaURL`/`schemaURL` names a schema version that is not
vendored, or a custom facet, is an error instead of a warning.

Needs: pip install jsonschema==4.26.0 referencing==0.37.0 rfc3339-validator==0.1.4 rfc3986-validator==0.1.1
(without the two rfc* packages jsonschema silently skips the `date-time` and
`uri` formats; the script refuses to run then).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterator

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

CORE_FILE = "OpenLineage.json"
# Facet location -> the kind of facet allowed there (suffix of the facet's $defs name).
KIND_SUFFIXES = ("InputDatasetFacet", "OutputDatasetFacet", "DatasetFacet", "RunFacet", "JobFacet")


class Failure(Exception):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def split_url(url: str) -> tuple[str, str]:
    base, _, frag = url.partition("#")
    return base, frag


def kind_of(def_name: str | None) -> str | None:
    if not def_name:
        return None
    for suffix in KIND_SUFFIXES:
        if def_name.endswith(suffix):
            return suffix
    return None


class Spec:
    def __init__(self, spec_dir: Path) -> None:
        files = sorted(spec_dir.rglob("*.json"))
        if not files:
            sys.exit(f"no schema files under {spec_dir}")
        resources = []
        self.by_id: dict[str, dict[str, Any]] = {}
        self.core_id: str | None = None
        # facet key -> (schema $id, $defs name) of the vendored facet schema
        self.facet_index: dict[str, tuple[str, str | None]] = {}
        for f in files:
            contents = json.loads(f.read_text(encoding="utf-8"))
            sid = contents.get("$id")
            if not sid:
                continue
            resources.append((sid, Resource.from_contents(contents, default_specification=DRAFT202012)))
            self.by_id[sid] = contents
            if f.name == CORE_FILE:
                self.core_id = sid
                continue
            for key, prop in (contents.get("properties") or {}).items():
                ref = prop.get("$ref", "") if isinstance(prop, dict) else ""
                def_name = ref.rsplit("/", 1)[-1] if ref.startswith("#/$defs/") else None
                self.facet_index[key] = (sid, def_name)
        if not self.core_id:
            sys.exit(f"{CORE_FILE} not found under {spec_dir}")
        self.registry = Registry().with_resources(resources)
        self._validators: dict[str, Draft202012Validator] = {}

    def validator(self, ref: str) -> Draft202012Validator:
        v = self._validators.get(ref)
        if v is None:
            v = Draft202012Validator(
                {"$ref": ref},
                registry=self.registry,
                format_checker=Draft202012Validator.FORMAT_CHECKER,
            )
            self._validators[ref] = v
        return v


def json_path(prefix: str, parts: Any) -> str:
    out = prefix
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def first_error(validator: Draft202012Validator, instance: Any, prefix: str) -> None:
    err: ValidationError | None = best_match(validator.iter_errors(instance))
    if err is not None:
        # descend into allOf/anyOf context to the most specific error
        while err.context:
            deeper = best_match(err.context)
            if deeper is None:
                break
            err = deeper
        raise Failure(json_path(prefix, err.absolute_path), err.message)


def facet_locations(event: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """Yield (json path of the facets object, expected kind, facets object)."""
    run, job = event.get("run") or {}, event.get("job") or {}
    yield "$.run.facets", "RunFacet", run.get("facets") or {}
    yield "$.job.facets", "JobFacet", job.get("facets") or {}
    for side, extra_key, extra_kind in (
        ("inputs", "inputFacets", "InputDatasetFacet"),
        ("outputs", "outputFacets", "OutputDatasetFacet"),
    ):
        for i, ds in enumerate(event.get(side) or []):
            yield f"$.{side}[{i}].facets", "DatasetFacet", ds.get("facets") or {}
            yield f"$.{side}[{i}].{extra_key}", extra_kind, ds.get(extra_key) or {}


def check_facet(
    spec: Spec, facets_path: str, key: str, expected_kind: str, facet: Any, strict: bool, warnings: list[str]
) -> str:
    """Validate one facet; return a short label for the summary line."""
    path = f"{facets_path}.{key}"
    if not isinstance(facet, dict):
        raise Failure(path, "facet is not an object")
    url = facet.get("_schemaURL")
    if not isinstance(url, str):
        raise Failure(path, "'_schemaURL' is a required property of every facet")
    base, frag = split_url(url)
    indexed = spec.facet_index.get(key)
    file_name = base.rsplit("/", 1)[-1]
    if indexed is not None and file_name != indexed[0].rsplit("/", 1)[-1]:
        # standard keys (parent, schema, columnLineage, ...) are reserved for their standard facet
        raise Failure(path + "._schemaURL", f"standard facet key '{key}' must use {indexed[0]}, got {url}")

    if base in spec.by_id:
        ref = url if frag else None
        def_name = frag.rsplit("/", 1)[-1] if frag.startswith("/$defs/") else (indexed[1] if indexed else None)
        sid = base
    elif indexed is not None:
        sid, def_name = indexed
        ref = None
        if strict:
            raise Failure(path + "._schemaURL", f"{url} is not vendored (have {sid})")
        warnings.append(f"{path}._schemaURL {url} is not vendored; validated against {sid}")
    else:
        if strict:
            raise Failure(path, f"custom facet '{key}' ({url}) has no vendored schema")
        warnings.append(f"{path}: custom facet '{key}' ({url}); only BaseFacet checked")
        return f"{key}(custom)"

    kind = kind_of(def_name)
    if kind is not None and kind != expected_kind:
        raise Failure(path, f"facet '{key}' is a {kind} ({def_name}) but sits where a {expected_kind} belongs")

    if ref is not None:
        first_error(spec.validator(ref), facet, path)
    else:
        # validate {key: facet} against the facet file's top-level "properties"
        first_error(spec.validator(sid), {key: facet}, facets_path)
    return key


def check_event(spec: Spec, event: Any, strict: bool, warnings: list[str]) -> str:
    if not isinstance(event, dict):
        raise Failure("$", "event is not a JSON object")
    first_error(spec.validator(f"{spec.core_id}#/$defs/RunEvent"), event, "$")
    base, frag = split_url(event["schemaURL"])
    if frag != "/$defs/RunEvent":
        raise Failure("$.schemaURL", f"expected ...OpenLineage.json#/$defs/RunEvent, got {event['schemaURL']}")
    if base not in spec.by_id:
        if strict:
            raise Failure("$.schemaURL", f"{base} is not vendored (have {spec.core_id})")
        warnings.append(f"$.schemaURL {base} is not vendored; validated against {spec.core_id}")

    labels: dict[str, list[str]] = {}
    for path, kind, facets in facet_locations(event):
        for key, facet in facets.items():
            label = check_facet(spec, path, key, kind, facet, strict, warnings)
            labels.setdefault(path, []).append(label)

    run_facets = ",".join(labels.get("$.run.facets", [])) or "-"
    job_facets = ",".join(labels.get("$.job.facets", [])) or "-"

    def ds_summary(side: str) -> str:
        items = []
        for i, ds in enumerate(event.get(side) or []):
            fs = labels.get(f"$.{side}[{i}].facets", []) + labels.get(
                f"$.{side}[{i}].{'inputFacets' if side == 'inputs' else 'outputFacets'}", []
            )
            items.append(f"{ds['namespace']}/{ds['name']}" + (f"({','.join(fs)})" if fs else ""))
        return "[" + " ".join(items) + "]"

    return (
        f"ok {event.get('eventType', '-')} run={event['run']['runId']} "
        f"job={event['job']['namespace']}/{event['job']['name']} "
        f"run.facets={run_facets} job.facets={job_facets} "
        f"inputs={ds_summary('inputs')} outputs={ds_summary('outputs')}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("events", help="file of OpenLineage RunEvents, one JSON object per line")
    ap.add_argument(
        "--spec-dir",
        default=os.environ.get("OPENLINEAGE_SPEC_DIR") or str(Path(__file__).resolve().parent / "openlineage-spec"),
    )
    ap.add_argument("--strict", action="store_true", help="non-vendored schema versions and custom facets are errors")
    args = ap.parse_args()

    missing = {"date-time", "uri", "uuid"} - set(Draft202012Validator.FORMAT_CHECKER.checkers)
    if missing:
        sys.exit(f"format checkers missing for {sorted(missing)}: pip install rfc3339-validator rfc3986-validator")
    spec = Spec(Path(args.spec_dir))
    count = 0
    with open(args.events, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            warnings: list[str] = []
            try:
                try:
                    event = json.loads(line)
                except json.JSONDecodeError as e:
                    raise Failure("$", f"invalid JSON: {e}") from None
                summary = check_event(spec, event, args.strict, warnings)
            except Failure as f:
                print(f"line {lineno}: error at {f.path}: {f.message}", file=sys.stderr)
                return 1
            for w in warnings:
                print(f"line {lineno}: warning: {w}", file=sys.stderr)
            print(summary)
            count += 1
    if count == 0:
        print(f"{args.events}: no events", file=sys.stderr)
        return 1
    print(f"{count} event(s) valid", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
