#!/usr/bin/env python3
"""Checks helm/dashboards/tunefarm.json.

1. Structure: the essentials of Grafana's dashboard model. No package ships
   Grafana's dashboard JSON schema (@grafana/schema on npm carries TypeScript
   types only), so the required fields and types below are transcribed by
   hand from @grafana/schema 13.x raw/dashboard/x/types.gen.d.ts: Dashboard
   (schemaVersion), Panel (type, gridPos, targets), RowPanel (id, type "row",
   collapsed, panels), GridPos (h, w, x, y), VariableModel (name, type).
   The whole dashboard is also checked against those very types by tsc in
   dashboard_schema_test.sh; this quick check needs no npm.
2. Metrics (with --metrics): every metric name in every PromQL expression must
   be exported by the real processes, as read from scrape dumps: Prometheus
   text exposition (what GET /metrics returns; files named *.prom when a
   folder is given) or plain lists with one metric family name per line.
   Label names used in expressions must come from the bounded label set.

Standard library only. Exit status 0 when every check passes, 1 otherwise.
"""
import argparse
import json
import os
import re
import sys

VARIABLE_TYPES = {"query", "adhoc", "groupby", "constant", "datasource",
                  "interval", "textbox", "custom", "system", "snapshot",
                  "switch"}
PANEL_TYPES = {"timeseries", "stat", "state-timeline", "status-history",
               "table", "bargauge", "gauge", "heatmap", "histogram", "text",
               "piechart", "barchart", "logs"}
BUILTIN_VARS = {"__rate_interval", "__interval", "__range", "__range_s",
                "__interval_ms", "__all", "__dashboard", "__from", "__to"}
# Bounded label sets (issue 8): board, node, chip, team, plus the fixed
# enumerations state and outcome, and the histogram/summary labels.
ALLOWED_LABELS = {"board", "node", "chip", "team", "state", "outcome", "le",
                  "quantile"}
PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left",
                   "group_right", "bool", "and", "or", "unless", "offset",
                   "inf", "nan"}


class Checker:
    def __init__(self):
        self.errors = []

    def error(self, where, what):
        self.errors.append(f"{where}: {what}")

    def expect(self, cond, where, what):
        if not cond:
            self.error(where, what)
        return cond


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def iter_panels(panels):
    """Every panel, rows' nested (collapsed) panels included."""
    for p in panels:
        yield p
        if isinstance(p, dict) and p.get("type") == "row":
            yield from iter_panels(p.get("panels") or [])


def check_structure(dash, c):
    c.expect(isinstance(dash, dict), "dashboard", "not a JSON object")
    if not isinstance(dash, dict):
        return
    c.expect(_is_int(dash.get("schemaVersion")), "schemaVersion",
             "required integer missing")
    if _is_int(dash.get("schemaVersion")):
        c.expect(dash["schemaVersion"] >= 36, "schemaVersion",
                 f"{dash['schemaVersion']} predates Grafana 9 (36)")
    for key in ("title", "uid"):
        c.expect(isinstance(dash.get(key), str) and dash.get(key), key,
                 "must be a non-empty string")
    t = dash.get("time")
    c.expect(isinstance(t, dict) and isinstance(t.get("from"), str)
             and isinstance(t.get("to"), str), "time",
             "must be {from: string, to: string}")

    variables = set()
    tmpl = dash.get("templating")
    if c.expect(isinstance(tmpl, dict) and isinstance(tmpl.get("list"), list),
                "templating", "must be {list: [...]}"):
        for i, v in enumerate(tmpl["list"]):
            where = f"templating.list[{i}]"
            if not c.expect(isinstance(v, dict), where, "not an object"):
                continue
            name = v.get("name")
            c.expect(isinstance(name, str) and name, where + ".name",
                     "required string missing")
            c.expect(v.get("type") in VARIABLE_TYPES, where + ".type",
                     f"{v.get('type')!r} is not a Grafana variable type")
            c.expect(name not in variables, where + ".name",
                     f"duplicate variable {name!r}")
            variables.add(name)

    panels = dash.get("panels")
    if not c.expect(isinstance(panels, list) and panels, "panels",
                    "must be a non-empty array"):
        return
    ids = set()
    for p in iter_panels(panels):
        where = f"panel {p.get('id')!r} ({p.get('title')!r})" \
            if isinstance(p, dict) else "panel"
        if not c.expect(isinstance(p, dict), where, "not an object"):
            continue
        c.expect(_is_int(p.get("id")), where + ".id", "required integer")
        c.expect(p.get("id") not in ids, where + ".id", "duplicate panel id")
        ids.add(p.get("id"))
        g = p.get("gridPos")
        if c.expect(isinstance(g, dict) and all(_is_int(g.get(k))
                                                for k in "hwxy"),
                    where + ".gridPos", "must have integer h, w, x, y"):
            c.expect(0 <= g["x"] and g["w"] >= 1 and g["x"] + g["w"] <= 24,
                     where + ".gridPos", "outside the 24-column grid")
            c.expect(g["h"] >= 1 and g["y"] >= 0, where + ".gridPos",
                     "height < 1 or negative y")
        for key in ("repeat",):
            if key in p:
                c.expect(p[key] in variables, where + ".repeat",
                         f"repeats by undefined variable {p[key]!r}")
        if p.get("type") == "row":
            c.expect(isinstance(p.get("collapsed"), bool), where + ".collapsed",
                     "rows need a boolean collapsed")
            c.expect(isinstance(p.get("panels"), list), where + ".panels",
                     "rows need a panels array")
            c.expect(p.get("collapsed") or not p.get("panels"),
                     where + ".panels",
                     "an expanded row keeps its panels at the top level")
            continue
        c.expect(p.get("type") in PANEL_TYPES, where + ".type",
                 f"{p.get('type')!r} is not a core Grafana panel type")
        targets = p.get("targets")
        if not c.expect(isinstance(targets, list) and targets,
                        where + ".targets", "must be a non-empty array"):
            continue
        refs = set()
        for j, t in enumerate(targets):
            tw = f"{where}.targets[{j}]"
            if not c.expect(isinstance(t, dict), tw, "not an object"):
                continue
            c.expect(isinstance(t.get("refId"), str) and t["refId"], tw,
                     "refId missing")
            c.expect(t.get("refId") not in refs, tw, "duplicate refId")
            refs.add(t.get("refId"))
            c.expect(isinstance(t.get("expr"), str) and t["expr"].strip(),
                     tw, "expr missing")
            for var in re.findall(r"\$\{?(\w+)", t.get("expr") or ""):
                c.expect(var in variables or var in BUILTIN_VARS, tw,
                         f"expr uses undefined variable ${var}")


def exprs(dash):
    for p in iter_panels(dash.get("panels") or []):
        for t in p.get("targets") or []:
            if isinstance(t, dict) and isinstance(t.get("expr"), str):
                yield p.get("title"), t["expr"]
    for v in (dash.get("templating") or {}).get("list") or []:
        query = v.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if v.get("type") == "query" and isinstance(query, str):
            yield f"variable {v.get('name')}", query


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)"
                       r"\s*\(([^)]*)\)")
_SELECTOR = re.compile(r"\{([^}]*)\}")
_IDENT = re.compile(r"(?<![\w$.])([a-zA-Z_:][a-zA-Z0-9_:]*)(?!\w)")


def metric_names_and_labels(expr):
    """(metric names, label names) an expression mentions."""
    labels = set()
    names = set()
    # label_values(metric, label) in variable queries.
    for m in re.finditer(r"label_values\(\s*([a-zA-Z_:][\w:]*)\s*,\s*(\w+)\s*\)",
                         expr):
        names.add(m.group(1))
        labels.add(m.group(2))
    e = re.sub(r"label_values\([^)]*\)", " ", expr)
    e = _STRING.sub('""', e)
    for m in _GROUPING.finditer(e):
        labels |= {x.strip() for x in m.group(2).split(",") if x.strip()}
    e = _GROUPING.sub(" ", e)
    for m in _SELECTOR.finditer(e):
        labels |= set(re.findall(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)",
                                 m.group(1)))
    e = _SELECTOR.sub(" ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)           # range selectors
    e = re.sub(r"\$\{?\w+\}?", " ", e)          # dashboard variables
    for m in _IDENT.finditer(e):
        word = m.group(1)
        rest = e[m.end():].lstrip()
        if rest.startswith("("):                # a function or aggregation
            continue
        if word.lower() in PROMQL_KEYWORDS:
            continue
        names.add(word)
    return names, labels


def read_scrapes(paths):
    """{family or sample name: type or None} from dumps or name lists."""
    files = []
    for path in paths:
        if os.path.isdir(path):
            files += sorted(os.path.join(path, f) for f in os.listdir(path)
                            if f.endswith(".prom") or f.endswith(".txt"))
        else:
            files.append(path)
    known = {}
    for f in files:
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                m = re.match(r"#\s*TYPE\s+(\S+)\s+(\S+)", line)
                if m:
                    known[m.group(1)] = m.group(2)
                    continue
                if line.startswith("#"):
                    continue
                m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)", line)
                if m:
                    known.setdefault(m.group(1), None)
    return files, known


def exported(name, known):
    if name in known:
        return True
    for suffix in ("_bucket", "_sum", "_count"):
        base = name[: -len(suffix)]
        if name.endswith(suffix) and known.get(base) in ("histogram",
                                                          "summary"):
            return True
    return False


def check_metrics(dash, scrape_paths, c):
    files, known = read_scrapes(scrape_paths)
    if not c.expect(files and known, "metrics",
                    f"no scraped metrics found in {scrape_paths}"):
        return
    used = set()
    for title, expr in exprs(dash):
        names, labels = metric_names_and_labels(expr)
        c.expect(names, f"{title}", f"no metric in expression {expr!r}")
        for n in sorted(names):
            used.add(n)
            c.expect(exported(n, known), f"{title}",
                     f"metric {n} is not exported by the processes "
                     f"(scraped: {', '.join(files)})")
        for lab in sorted(labels - ALLOWED_LABELS):
            c.error(f"{title}", f"label {lab!r} is outside the bounded set "
                    f"{sorted(ALLOWED_LABELS)}")
    print(f"check_dashboard: {len(used)} metric names checked against "
          f"{len(known)} scraped names from {len(files)} file(s)")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dashboard")
    ap.add_argument("--metrics", action="append", default=[],
                    help="scrape dump file or folder of *.prom (repeatable)")
    args = ap.parse_args(argv)
    c = Checker()
    try:
        with open(args.dashboard, encoding="utf-8") as fh:
            dash = json.load(fh)
    except (OSError, ValueError) as e:
        print(f"{args.dashboard}: {e}", file=sys.stderr)
        return 1
    check_structure(dash, c)
    if args.metrics:
        check_metrics(dash, args.metrics, c)
    for e in c.errors:
        print(f"{args.dashboard}: {e}", file=sys.stderr)
    if c.errors:
        return 1
    n = sum(1 for _ in iter_panels(dash["panels"]))
    print(f"check_dashboard: {args.dashboard}: {n} panels, structure ok"
          + (", every metric exported" if args.metrics else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
