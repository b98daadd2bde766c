import gc, os, signal, collections, time
_t = {}
def _gc(phase, info):
    if info["generation"] != 2: return
    if phase == "start": _t["t"] = time.monotonic(); return
    with open("/tmp/lat/gc-%d.txt" % os.getpid(), "a") as f:
        f.write("%.3f gen2 %.1fms collected %d tracked %d frozen %d\n" % (time.monotonic(), (time.monotonic()-_t["t"])*1e3, info["collected"], len(gc.get_objects()), gc.get_freeze_count()))
gc.callbacks.append(_gc)
def _dump(*a):
    c = collections.Counter(type(o).__module__ + "." + type(o).__qualname__ for o in gc.get_objects())
    with open("/tmp/lat/objs-%d.txt" % os.getpid(), "w") as f:
        f.write("total %d frozen %d\n" % (sum(c.values()), gc.get_freeze_count()))
        for k, v in c.most_common(40): f.write("%8d %s\n" % (v, k))
signal.signal(signal.SIGUSR2, _dump)
