#!/usr/bin/env python3
"""Checks manifests rendered by `helm template` from helm/ against what the
chart promises (issue 8). Reads the rendered YAML stream (a file argument),
takes the values it was rendered with as flags, prints every failed check and
exits 1 if any failed. Needs python3-yaml."""
import argparse
import sys

import yaml


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("rendered")
    ap.add_argument("--resource", required=True)
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--workload", default="DaemonSet")
    ap.add_argument("--release-label", required=True)
    ap.add_argument("--auth", choices=["on", "off"], default="on")
    ap.add_argument("--tls", choices=["on", "off"], default="off")
    ap.add_argument("--tokens-secret")
    ap.add_argument("--agent-token-secret")
    ap.add_argument("--tls-secret")
    ap.add_argument("--curve-secret", required=True)
    ap.add_argument("--curve-agents-secret", required=True)
    ap.add_argument("--network-policy", choices=["on", "off"], default="on")
    ap.add_argument("--existing", action="append", default=[],
                    help="a Secret the user provides (repeatable)")
    a = ap.parse_args(argv)
    errors = []

    def check(cond, what):
        if not cond:
            errors.append(what)
        return cond

    with open(a.rendered, encoding="utf-8") as fh:
        docs = [d for d in yaml.safe_load_all(fh) if d]
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)

    def one(kind, suffix):
        found = [d for d in by_kind.get(kind, [])
                 if d["metadata"]["name"].endswith(suffix)]
        check(len(found) == 1, f"expected one {kind} *{suffix}, found "
              f"{[d['metadata']['name'] for d in found]}")
        return found[0] if found else None

    def container_args(pod):
        return pod["spec"]["containers"][0].get("args", [])

    def flag(args, name):
        return args[args.index(name) + 1] if name in args else None

    def mounted(pod, secret):
        """mountPath of the volume backed by `secret`, or None."""
        spec = pod["spec"]
        vols = {v["name"] for v in spec.get("volumes", [])
                if v.get("secret", {}).get("secretName") == secret}
        for m in spec["containers"][0].get("volumeMounts", []):
            if m["name"] in vols:
                return m["mountPath"]
        return None

    # Coordinator: one replica, RocksDB on a claim from a template.
    sts = one("StatefulSet", "-coordinator")
    if sts:
        check(sts["spec"]["replicas"] == 1, "coordinator replicas != 1")
        vcts = sts["spec"].get("volumeClaimTemplates", [])
        check(len(vcts) == 1 and vcts[0]["metadata"]["name"] == "data",
              "coordinator needs one volumeClaimTemplate named data")
        pod = sts["spec"]["template"]
        mounts = {m["name"]: m["mountPath"] for m in
                  pod["spec"]["containers"][0].get("volumeMounts", [])}
        check(mounts.get("data") == "/data", "claim 'data' not at /data")
        args = container_args(pod)
        check(flag(args, "--data_dir") == "/data", f"--data_dir: {args}")
        check(flag(args, "--listen") == "0.0.0.0:7070", f"--listen: {args}")
        check(flag(args, "--metrics_address") == "0.0.0.0:9090",
              f"--metrics_address: {args}")
        # ZeroMQ binds the pod's own address, never 0.0.0.0, and speaks
        # CURVE with keys from the curve Secret (issue 16).
        check(flag(args, "--diagnosis_bind") == "tcp://$(POD_IP):5557",
              f"--diagnosis_bind: {args}")
        curve_dir = mounted(pod, a.curve_secret)
        for f in ("--curve_key_file", "--curve_allow_list"):
            v = flag(args, f)
            check(v and curve_dir and v.startswith(curve_dir + "/"),
                  f"coordinator {f} {v} not in the curve secret")
        # Health-check goldens ship in the image's ops/ (deploy/Dockerfile).
        hd = flag(args, "--health_dir")
        check(hd is None or hd.startswith("/opt/tunefarm/ops/"),
              f"--health_dir {hd} is not in the image's ops/")
        check(hd is None or (flag(args, "--health_check_interval_s") and
                             flag(args, "--health_retry_s")),
              f"--health_dir without its intervals: {args}")
        check(any(s["metadata"]["name"] == sts["spec"]["serviceName"]
                  for s in by_kind.get("Service", [])),
              "StatefulSet serviceName has no Service")
        if a.auth == "on":
            tf = flag(args, "--tokens_file")
            where = mounted(pod, a.tokens_secret)
            check(tf and where and tf.startswith(where + "/"),
                  f"--tokens_file {tf} not in the mounted secret "
                  f"{a.tokens_secret} ({where})")
        else:
            check("--tokens_file" not in args, "auth off but --tokens_file")
        if a.tls == "on":
            where = mounted(pod, a.tls_secret)
            for f in ("--tls_cert", "--tls_key"):
                v = flag(args, f)
                check(v and where and v.startswith(where + "/"),
                      f"{f} {v} not in the mounted secret {a.tls_secret}")
        else:
            check("--tls_cert" not in args, "tls off but --tls_cert")

    # Agents: the chosen device resource, as many boards as devices.
    agent = one(a.workload, "-agent")
    other = "Deployment" if a.workload == "DaemonSet" else "DaemonSet"
    check(not [d for d in by_kind.get(other, [])
               if d["metadata"]["name"].endswith("-agent")],
          f"agents rendered as {other} too")
    if agent:
        pod = agent["spec"]["template"]
        res = pod["spec"]["containers"][0]["resources"]
        check(str(res.get("limits", {}).get(a.resource)) == str(a.devices),
              f"agent limits {res.get('limits')} lack {a.resource}: "
              f"{a.devices}")
        for r in ("huawei.com/Ascend910", "nvidia.com/gpu"):
            if r != a.resource:
                check(r not in res.get("limits", {}), f"agent also asks {r}")
        args = container_args(pod)
        boards = flag(args, "--boards") or ""
        check(boards.endswith(f":{a.devices}"),
              f"--boards {boards} disagrees with {a.devices} devices")
        check((flag(args, "--coordinator") or "").endswith(":7070"),
              f"agent --coordinator: {args}")
        check((flag(args, "--analyzer") or "").startswith("tcp://"),
              f"agent --analyzer: {args}")
        curve_dir = mounted(pod, a.curve_secret)
        v = flag(args, "--analyzer_public_key_file")
        check(v and curve_dir and v.startswith(curve_dir + "/"),
              f"agent --analyzer_public_key_file {v} not in the curve secret")
        items = [v["secret"].get("items") for v in pod["spec"]["volumes"]
                 if v.get("secret", {}).get("secretName") == a.curve_secret]
        check(items and {i["key"] for i in items[0]} == {"analyzer.pub"},
              f"agents must mount only analyzer.pub of the curve secret: "
              f"{items}")
        # Each agent its own key pair (by node name): an init container
        # copies it from the agents' Secret into a memory volume; the agent
        # container never mounts that Secret, so it sees no other agent's.
        check(mounted(pod, a.curve_agents_secret) is None,
              "the agent container mounts every agent's key")
        inits = pod["spec"].get("initContainers", [])
        init = next((c for c in inits if c["name"] == "curve-key"), None)
        own = {v["name"] for v in pod["spec"]["volumes"]
               if v.get("emptyDir", {}).get("medium") == "Memory"}
        agents_vol = {v["name"] for v in pod["spec"]["volumes"]
                      if v.get("secret", {}).get("secretName")
                      == a.curve_agents_secret}
        if check(init is not None, "no curve-key init container"):
            mounts = {m["name"]: m["mountPath"]
                      for m in init.get("volumeMounts", [])}
            check(agents_vol and any(n in mounts for n in agents_vol),
                  f"curve-key does not mount {a.curve_agents_secret}")
            script = " ".join(init.get("command", []))
            check("$NODE_NAME.key" in script,
                  f"curve-key does not pick its node's key: {script}")
            check(any(e["name"] == "NODE_NAME" for e in init.get("env", [])),
                  "curve-key has no NODE_NAME")
        key = flag(args, "--curve_key_file") or ""
        own_dir = next((m["mountPath"] for m in
                        pod["spec"]["containers"][0].get("volumeMounts", [])
                        if m["name"] in own), None)
        check(own_dir and key.startswith(own_dir + "/"),
              f"agent --curve_key_file {key} not in its own memory volume")
        if a.auth == "on":
            tf = flag(args, "--token_file")
            where = mounted(pod, a.agent_token_secret)
            check(tf and where and tf.startswith(where + "/"),
                  f"agent --token_file {tf} not in the mounted secret "
                  f"{a.agent_token_secret}")
            check(mounted(pod, a.tokens_secret) is None
                  or a.tokens_secret == a.agent_token_secret,
                  "agents must not mount the team tokens file")
        if a.tls == "on":
            ca = flag(args, "--tls_ca")
            where = mounted(pod, a.tls_secret)
            check(ca and where and ca.startswith(where + "/"),
                  f"agent --tls_ca {ca} not in the mounted secret")
            items = [v["secret"].get("items") for v in pod["spec"]["volumes"]
                     if v.get("secret", {}).get("secretName") == a.tls_secret]
            check(items and items[0] == [{"key": "ca.crt", "path": "ca.crt"}],
                  "agents must mount only ca.crt of the TLS secret")

    # Analyzers: a Deployment dialling the coordinator's diagnosis port.
    an = one("Deployment", "-analyzer")
    if an:
        args = container_args(an["spec"]["template"])
        check((flag(args, "--coordinator") or "").endswith(":5557"),
              f"analyzer --coordinator: {args}")
        check((flag(args, "--bind") or "").startswith("tcp://$(POD_IP):"),
              f"analyzer --bind: {args}")
        curve_dir = mounted(an["spec"]["template"], a.curve_secret)
        for f in ("--curve_key_file", "--curve_allow_list",
                  "--coordinator_public_key_file"):
            v = flag(args, f)
            check(v and curve_dir and v.startswith(curve_dir + "/"),
                  f"analyzer {f} {v} not in the curve secret")

    # NetworkPolicies fence the ZeroMQ ports and /metrics.
    nps = {d["metadata"]["name"].rsplit("-", 1)[-1]: d
           for d in by_kind.get("NetworkPolicy", [])}
    if a.network_policy == "on":
        check(set(nps) == {"coordinator", "analyzer", "agent"},
              f"NetworkPolicies: {sorted(nps)}")
        for name, np in nps.items():
            for rule in np["spec"].get("ingress", []):
                ports = {p["port"] for p in rule.get("ports", [])}
                if ports & {"diagnosis", "bundles", "metrics"}:
                    check(rule.get("from"),
                          f"NetworkPolicy {name}: {ports} open to all")
    else:
        check(not nps, "networkPolicy off but NetworkPolicies rendered")

    # Services select pods that exist, and the ServiceMonitor finds them.
    pod_labels = [w["spec"]["template"]["metadata"]["labels"]
                  for w in by_kind.get("StatefulSet", []) +
                  by_kind.get("Deployment", []) + by_kind.get("DaemonSet", [])]
    for s in by_kind.get("Service", []):
        sel = s["spec"].get("selector", {})
        check(any(all(l.get(k) == v for k, v in sel.items())
                  for l in pod_labels),
              f"Service {s['metadata']['name']} selects no pod")
    sms = by_kind.get("ServiceMonitor", [])
    if check(len(sms) == 1, f"expected one ServiceMonitor, got {len(sms)}"):
        sm = sms[0]
        check(sm["metadata"]["labels"].get("release") == a.release_label,
              f"ServiceMonitor release label "
              f"{sm['metadata']['labels'].get('release')!r} != "
              f"{a.release_label!r}")
        sel = sm["spec"]["selector"]["matchLabels"]
        scraped = {s["metadata"]["labels"].get("app.kubernetes.io/component")
                   for s in by_kind.get("Service", [])
                   if all(s["metadata"]["labels"].get(k) == v
                          for k, v in sel.items())
                   and any(p.get("name") == "metrics"
                           for p in s["spec"]["ports"])}
        check(scraped == {"coordinator", "agent", "analyzer"},
              f"ServiceMonitor scrapes {scraped}")

    # Every Secret a pod mounts is rendered here or named as the user's own.
    rendered = {d["metadata"]["name"] for d in by_kind.get("Secret", [])}
    for w in (by_kind.get("StatefulSet", []) + by_kind.get("Deployment", [])
              + by_kind.get("DaemonSet", [])):
        for v in w["spec"]["template"]["spec"].get("volumes", []):
            name = v.get("secret", {}).get("secretName")
            if name:
                check(name in rendered or name in a.existing,
                      f"{w['metadata']['name']} mounts Secret {name}, which "
                      f"is neither rendered nor an existing secret")

    dash = [c for c in by_kind.get("ConfigMap", [])
            if c["metadata"]["labels"].get("grafana_dashboard") == "1"]
    check(len(dash) == 1 and "tunefarm.json" in dash[0]["data"],
          "no dashboard ConfigMap labelled grafana_dashboard: \"1\"")

    for e in errors:
        print(f"check_manifests: {a.rendered}: {e}", file=sys.stderr)
    if not errors:
        print(f"check_manifests: {a.rendered}: {len(docs)} objects ok")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
