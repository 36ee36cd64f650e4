"""`make demo`: `main.py` runs the acts in order on a fresh lab, `context.py` is what an act sees (steps, story
lines, logs), and each `<area>_act.py` is one act (etcd, controller, sabakan, watchdog, provisioning, machines)."""
