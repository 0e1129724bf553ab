# Runs every test of `ctest --show-only=json-v1` two at a time; per test: exit status, user+sys CPU (os.wait4), wall.
import json, os, subprocess, sys, threading, time, queue
d = json.load(open(sys.argv[1])); tag = sys.argv[2]
q = queue.Queue()
for t in d['tests']: q.put(t)
res = []; lock = threading.Lock()
def work():
    while True:
        try: t = q.get_nowait()
        except queue.Empty: return
        env = dict(os.environ); wd = None; pass_re = None
        for p in t.get('properties', []):
            if p['name'] == 'ENVIRONMENT':
                for kv in p['value']: k, v = kv.split('=', 1); env[k] = v
            if p['name'] == 'WORKING_DIRECTORY': wd = p['value']
        t0 = time.time()
        with open(f"{os.path.dirname(sys.argv[1])}/{tag}.{t['name']}.log", 'w') as log:
            p = subprocess.Popen(t['command'], cwd=wd, env=env, stdout=log, stderr=subprocess.STDOUT)
            _, status, ru = os.wait4(p.pid, 0)
        with lock: res.append((t['name'], os.waitstatus_to_exitcode(status), ru.ru_utime + ru.ru_stime, time.time() - t0))
ths = [threading.Thread(target=work) for _ in range(2)]
[x.start() for x in ths]; [x.join() for x in ths]
for r in sorted(res, key=lambda r: -r[2]): print(f"{r[2]:7.2f} {r[3]:7.2f} rc={r[1]} {r[0]}")
print(f"TOTAL cpu {sum(r[2] for r in res):.1f}")
