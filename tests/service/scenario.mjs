// The LangSmith JS client (npm langsmith, module langsmith/sandbox), unchanged, against
// sandboxd (issue 30, "The real client"). Only the SDK's public API: SandboxClient, Sandbox,
// their handles and error classes. Each check prints "ok NAME" or "FAIL NAME: why"; the exit
// status is 1 on any failure, 2 on bad usage.
//
// Environment:
//   SANDBOXD_URL           the service, e.g. http://127.0.0.1:8380 (the control plane under
//                          /api/v2/sandboxes; the second key's client uses /v2/sandboxes)
//   SANDBOXD_KEY           a key of workspace 1 (no quota)
//   SANDBOXD_KEY2          a key of workspace 2, whose quota is sandboxes=1
//   SCENARIO_NODE_MODULES  the node_modules holding langsmith (tools/dev node-paths); without
//                          it, `langsmith/sandbox` is resolved as usual
//   SCENARIO_SUBSET        check names to run (commas or spaces); default every check.
//                          "@no-ws": the checks that need no WebSocket (NO_WS below)
//   SCENARIO_API_DOC       docs/api.md (default: the checkout's), for "Refused methods"
//   SCENARIO_SHELL         the shell of commands (default /bin/sh: the busybox image has no
//                          bash; run_default_shell leaves it to the service's default)
//   SCENARIO_CHECK_TIMEOUT_S  each check's bound (default 600: creates in the emulated host)
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import {
  CallRecorder,
  Relay,
  bounded,
  coverage,
  eq,
  must,
  refusalOf,
  refusedMethods,
  runChecks,
  show,
  sleep,
  throwsA,
} from "./harness.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const env = process.env;
for (const v of ["SANDBOXD_URL", "SANDBOXD_KEY", "SANDBOXD_KEY2"]) {
  if (!env[v]) {
    console.error(`scenario: ${v} is not set`);
    process.exit(2);
  }
}
const modules = env.SCENARIO_NODE_MODULES;
const sdkDir = modules
  ? path.join(modules, "langsmith")
  : path.dirname(path.dirname(fileURLToPath(import.meta.resolve("langsmith/sandbox"))));
const sdk = await import(
  modules ? pathToFileURL(path.join(sdkDir, "sandbox.mjs")).href : "langsmith/sandbox"
);
const { SandboxClient, Sandbox } = sdk;
const recorder = new CallRecorder();
recorder.wrap(SandboxClient);
recorder.wrap(Sandbox);

const base = env.SANDBOXD_URL.replace(/\/+$/, "");
const apiDoc = env.SCENARIO_API_DOC || path.join(here, "..", "..", "docs", "api.md");
let refused = new Map();
try {
  refused = refusedMethods(fs.readFileSync(apiDoc, "utf8"))?.refused ?? new Map();
} catch (e) {
  // the coverage check says the file is missing
}
const SH = env.SCENARIO_SHELL || "/bin/sh";
const limitMs = 1000 * Number(env.SCENARIO_CHECK_TIMEOUT_S || 600);
const tag = crypto.randomBytes(3).toString("hex");
const nm = (what) => `scn-${tag}-${what}`;

const client = new SandboxClient({ apiEndpoint: `${base}/api/v2/sandboxes`, apiKey: env.SANDBOXD_KEY });
const client2 = new SandboxClient({ apiEndpoint: `${base}/v2/sandboxes`, apiKey: env.SANDBOXD_KEY2 });

// What the checks share: the main sandbox, the snapshot, the sandbox made from it; what to
// remove at the end.
const st = { box: null, snap: null, box2: null, sandboxes: new Set(), snapshots: new Set() };
const CREATE = { timeout: 180 };
const sh = (o = {}) => ({ shell: SH, timeout: 120, ...o });

async function created(promise) {
  const sb = await promise;
  st.sandboxes.add(sb.name);
  return sb;
}

async function mainBox() {
  if (!st.box) st.box = await created(client.createSandbox({ name: nm("main"), ...CREATE }));
  return st.box;
}

async function text(sb, cmd, o) {
  const r = await sb.run(cmd, sh(o));
  eq(r.exit_code, 0, `exit status of ${show(cmd)} (stderr ${show(r.stderr)})`);
  return r.stdout;
}

const dec = (u8) => new TextDecoder().decode(u8);
const sameBytes = (a, b) => a.length === b.length && Buffer.compare(Buffer.from(a), Buffer.from(b)) === 0;

// A command that writes 60 numbered lines to each stream over ~3 s, and what it writes.
const TICKS = 60;
const tickCmd = `i=0; while [ $i -lt ${TICKS} ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); sleep 0.05; done`;
const ticks = (p) => Array.from({ length: TICKS }, (_, i) => `${p} ${i}\n`).join("");

// A stop may answer before the VMM is gone: the status must say "stopped" within 60 s.
async function stopped(name, what) {
  let s = "";
  for (let i = 0; i < 120 && s !== "stopped"; i++) {
    s = (await client.getSandboxStatus(name)).status;
    if (s !== "stopped") await sleep(500);
  }
  eq(s, "stopped", `status ${what}`);
}

// A Sandbox object whose dataplane goes through a relay the scenario can cut.
async function viaRelay(sb) {
  const u = new URL(sb.dataplane_url);
  must(u.protocol === "http:", `dataplane_url ${u.href} is not http (the relay check is plain TCP)`);
  const relay = new Relay(u.hostname, Number(u.port || 80));
  const port = await relay.listen();
  const other = await client.getSandbox(sb.name);
  other.dataplane_url = `http://127.0.0.1:${port}${u.pathname}${u.search}`;
  return { relay, other };
}

// A check for a method docs/api.md may refuse: run it when not refused, else the SDK must throw.
function refusable(cls, method, fn) {
  return async () => {
    const why = refusalOf(refused, cls, method);
    if (why === undefined) return fn();
    let threw = null;
    try {
      await fn();
    } catch (e) {
      threw = e;
    }
    must(threw !== null, `${cls}.${method} is listed as refused (${why}) but succeeded`);
    return `refused: ${why}`;
  };
}

const checks = [
  { name: "create_default", run: async () => {
    const sb = await mainBox();
    eq(sb.status, "ready", "status");
    must(/^https?:\/\//.test(sb.dataplane_url || ""), `dataplane_url ${show(sb.dataplane_url)}`);
    must(sb.id, "no id");
  } },
  { name: "get", needs: ["create_default"], run: async () => {
    const g = await client.getSandbox(st.box.name);
    eq(g.id, st.box.id, "id");
    eq(g.dataplane_url, st.box.dataplane_url, "dataplane_url");
    eq((await client.getSandboxStatus(st.box.name)).status, "ready", "status");
    eq((await client.waitForSandbox(st.box.name, { timeout: 60 })).id, st.box.id, "waitForSandbox id");
  } },
  { name: "list", needs: ["create_default"], run: async () => {
    const all = await client.listSandboxes();
    must(all.some((s) => s.id === st.box.id), `${st.box.name} not in ${show(all.map((s) => s.name).join(","))}`);
  } },
  { name: "run_exit", needs: ["create_default"], run: async () => {
    eq((await st.box.run("true", sh())).exit_code, 0, "true");
    eq((await st.box.run("exit 3", sh())).exit_code, 3, "exit 3");
    eq((await st.box.run("kill -9 $$", sh())).exit_code === 0, false, "killed shell's status is 0");
  } },
  { name: "run_streams", needs: ["create_default"], run: async () => {
    const r = await st.box.run("echo to-out; echo to-err >&2; printf 'no newline'", sh());
    eq(r.stdout, "to-out\nno newline", "stdout");
    eq(r.stderr, "to-err\n", "stderr");
  } },
  { name: "run_env", needs: ["create_default"], run: async () => {
    eq(await text(st.box, 'printf "%s|%s" "$FOO" "$BAR"', { env: { FOO: "x y'z", BAR: "é" } }), "x y'z|é", "env");
  } },
  { name: "run_cwd", needs: ["create_default"], run: async () => {
    eq(await text(st.box, "pwd", { cwd: "/tmp" }), "/tmp\n", "cwd /tmp");
    eq(await text(st.box, "mkdir -p /root/wd && cd /root/wd && pwd"), "/root/wd\n", "mkdir");
    eq(await text(st.box, "pwd", { cwd: "/root/wd" }), "/root/wd\n", "cwd /root/wd");
  } },
  { name: "run_default_shell", needs: ["create_default"], run: async () => {
    const r = await st.box.run("echo $((6*7))", { timeout: 60 });
    eq(r.exit_code, 0, `exit status (stderr ${show(r.stderr)})`);
    eq(r.stdout, "42\n", "stdout");
  } },
  { name: "stream_callbacks", needs: ["create_default"], run: async () => {
    let out = "", err = "", calls = 0, firstAt = 0;
    const t0 = Date.now();
    const r = await st.box.run(tickCmd, sh({
      onStdout: (d) => { out += d; calls++; firstAt ||= Date.now() - t0; },
      onStderr: (d) => { err += d; },
    }));
    eq(r.exit_code, 0, "exit");
    eq(out, ticks("out"), "stdout seen by onStdout");
    eq(err, ticks("err"), "stderr seen by onStderr");
    eq(r.stdout, out, "result stdout");
    must(calls > 1, `onStdout called ${calls} time(s): output not streamed`);
    return `${calls} stdout chunks, first after ${firstAt} ms`;
  } },
  { name: "wait_false_input", needs: ["create_default"], run: async () => {
    const h = await st.box.run("cat; echo done", sh({ wait: false, closeInput: false }));
    must(h.commandId, "no command id");
    h.sendInput("hello\n");
    h.sendInput("wörld\n");
    h.closeInput();
    const r = await bounded(h.result, 60000, "cat after closeInput");
    eq(r.stdout, "hello\nwörld\ndone\n", "stdout");
    eq(r.exit_code, 0, "exit");
  } },
  { name: "wait_false_kill", needs: ["create_default"], run: async () => {
    const h = await st.box.run("echo begin; sleep 300; echo never", sh({ wait: false, timeout: 600 }));
    const it = h[Symbol.asyncIterator]();
    const first = await bounded(it.next(), 60000, "first chunk");
    eq(first.value?.data, "begin\n", "first chunk");
    h.kill();
    const r = await bounded(h.result, 30000, "exit after kill");
    must(r.exit_code !== 0, `exit status ${r.exit_code} after kill`);
    must(!r.stdout.includes("never"), "the command went on after kill");
    eq(await text(st.box, "ps | grep '[s]leep 300' || echo none"), "none\n", "the process group's sleep");
    return `exit ${r.exit_code}`;
  } },
  { name: "reconnect", needs: ["create_default"], run: async () => {
    const { relay, other } = await viaRelay(st.box);
    try {
      const h = await other.run(tickCmd, sh({ wait: false }));
      const id = h.commandId;
      must(id, "no command id");
      const got = { stdout: "", stderr: "" };
      const it = h[Symbol.asyncIterator]();
      while (got.stdout.length < 40) {
        const r = await bounded(it.next(), 60000, "output before the cut");
        must(!r.done, "the command ended before the cut");
        got[r.value.stream] += r.value.data;
      }
      relay.refuse = true; // the old handle must not reattach behind our back
      relay.sever();
      await it.return();
      await sleep(500); // output goes on while nobody is attached
      const h2 = await st.box.reconnect(id, { stdoutOffset: h.lastStdoutOffset, stderrOffset: h.lastStderrOffset });
      for await (const c of h2) got[c.stream] += c.data;
      eq((await h2.result).exit_code, 0, "exit after reconnect");
      eq(got.stdout, ticks("out"), "stdout before + after the cut");
      eq(got.stderr, ticks("err"), "stderr before + after the cut");
    } finally {
      relay.close();
    }
  } },
  { name: "reconnect_auto", needs: ["create_default"], run: async () => {
    const { relay, other } = await viaRelay(st.box);
    try {
      relay.cutAfter(700); // the handshake's answer and a few frames, then mid-frame
      const h = await other.run(tickCmd, sh({ wait: false }));
      const got = { stdout: "", stderr: "" };
      for await (const c of h) got[c.stream] += c.data;
      must(relay.cuts >= 1, "the relay never cut the stream");
      must(relay.connections >= 2, "the handle never reattached");
      eq(got.stdout, ticks("out"), "stdout across the cut");
      eq(got.stderr, ticks("err"), "stderr across the cut");
      eq((await h.result).exit_code, 0, "exit");
      return `${relay.connections} connections`;
    } finally {
      relay.close();
    }
  } },
  { name: "pty", needs: ["create_default"], run: async () => {
    const r = await st.box.run("if [ -t 0 ] && [ -t 1 ]; then echo tty-yes; else echo tty-no; fi; echo to-err >&2", sh({ pty: true }));
    must(r.stdout.includes("tty-yes"), `stdout ${show(r.stdout)}`);
    must(r.stdout.includes("to-err"), `stderr not merged into stdout under a pty: ${show(r.stdout)}`);
    const h = await st.box.run("read line; echo got:$line", sh({ pty: true, wait: false }));
    h.sendInput("abc\n");
    const r2 = await bounded(h.result, 60000, "read under a pty");
    must(r2.stdout.includes("got:abc"), `stdout ${show(r2.stdout)}`);
  } },
  { name: "files_text", needs: ["create_default"], run: async () => {
    const t = "héllo\nworld ✓\nthird line\n";
    await st.box.write("/root/t.txt", t);
    eq(dec(await st.box.read("/root/t.txt")), t, "read back");
    eq(await text(st.box, "cat /root/t.txt"), t, "cat in the guest");
    await st.box.write("/root/new/dir/t.txt", "deep");
    eq(dec(await st.box.read("/root/new/dir/t.txt")), "deep", "parents created");
  } },
  { name: "files_binary", needs: ["create_default"], run: async () => {
    const all = new Uint8Array(1024).map((_, i) => i % 256);
    await st.box.write("/root/b.bin", all);
    must(sameBytes(await st.box.read("/root/b.bin"), all), "all 256 byte values did not come back");
    const sum = crypto.createHash("sha256").update(all).digest("hex");
    eq((await text(st.box, "sha256sum /root/b.bin")).split(" ")[0], sum, "sha256 in the guest");
  } },
  { name: "files_5mib", needs: ["create_default"], run: async () => {
    const big = crypto.randomBytes(5 << 20);
    await st.box.write("/root/big.bin", big, 300);
    const back = await st.box.read("/root/big.bin", 300);
    must(sameBytes(back, big), `5 MiB: ${back.length} bytes back, not the same`);
    const sum = crypto.createHash("sha256").update(big).digest("hex");
    eq((await text(st.box, "sha256sum /root/big.bin")).split(" ")[0], sum, "sha256 in the guest");
  } },
  { name: "files_stat_range", needs: ["files_binary"], run: refusable("Sandbox", "readRange", async () => {
    const s = await st.box.stat("/root/b.bin");
    eq(s.size_bytes, 1024, "stat size");
    const c = await st.box.readRange("/root/b.bin", { start: 1000, end: 1019 });
    eq(c.start, 1000, "range start");
    must(sameBytes(c.content, new Uint8Array(20).map((_, i) => (1000 + i) % 256)), "range bytes");
  }) },
  { name: "files_missing", needs: ["create_default"], run: async () => {
    await throwsA(sdk.LangSmithResourceNotFoundError, () => st.box.read("/root/no-such-file"), "read of a missing file");
  } },
  { name: "glob_grep", needs: ["files_text"], run: refusable("Sandbox", "glob", async () => {
    const g = await st.box.glob("**/*.txt", "/root");
    const paths = g.matches.map((m) => m.path);
    must(paths.some((p) => p.endsWith("t.txt")), `glob: ${show(paths.join(","))}`);
    const l = await st.box.ls("/root");
    must(l.matches.some((m) => m.path.endsWith("new") && m.is_dir), `ls: ${show(l.matches.map((m) => m.path).join(","))}`);
    const r = await st.box.grep("world", "/root", { glob: "*.txt" });
    must(r.matches.some((m) => m.line === 2 && m.text.includes("world")), `grep: ${show(JSON.stringify(r.matches))}`);
  }) },
  { name: "download_url", needs: ["files_text"], run: async () => {
    const l1 = await st.box.generateDownloadURL("/root/t.txt", { expiresInSeconds: 600 });
    const r1 = await fetch(l1.download_url);
    eq(r1.status, 200, "download link status");
    eq(await r1.text(), "héllo\nworld ✓\nthird line\n", "download link body");
    const l2 = await client.generateDownloadURL(st.box.name, "/root/b.bin");
    const r2 = await fetch(l2.download_url);
    must(sameBytes(new Uint8Array(await r2.arrayBuffer()), new Uint8Array(1024).map((_, i) => i % 256)), "binary link body");
    const bad = await fetch(l1.download_url.replace(/.$/, (c) => (c === "A" ? "B" : "A")));
    must(bad.status >= 400 && bad.status < 500, `a link with a changed token answered ${bad.status}`);
  } },
  { name: "service_url", needs: ["create_default"], run: async () => {
    await text(st.box, "mkdir -p /root/www && echo svc-hello > /root/www/index.html && busybox httpd -p 8080 -h /root/www");
    const svc = await client.serviceUrl(st.box.name, { port: 8080, expiresInSeconds: 600 });
    const url = await svc.serviceUrl();
    must(/^https?:\/\//.test(url), `service url ${show(url)}`);
    must((await svc.token()).length >= 16, "short token");
    must(!Number.isNaN(Date.parse(await svc.expiresAt())), "expiresAt");
    let r;
    for (let i = 0; i < 20; i++) { // httpd may take a moment to listen
      r = await svc.fetch("/index.html");
      if (r.status === 200) break;
      await sleep(500);
    }
    eq(r.status, 200, "with the token");
    eq(await r.text(), "svc-hello\n", "body");
    const none = await fetch(`${url.replace(/\/+$/, "")}/index.html`);
    must(none.status === 401 || none.status === 403, `without the token: ${none.status}`);
    must(!(await none.text()).includes("svc-hello"), "the page leaked without the token");
    const wrong = await fetch(`${url.replace(/\/+$/, "")}/index.html`, {
      headers: { [sdk.SERVICE_TOKEN_HEADER]: "x" + (await svc.token()) },
    });
    must(wrong.status === 401 || wrong.status === 403, `with a wrong token: ${wrong.status}`);
  } },
  { name: "snapshot", needs: ["create_default"], run: async () => {
    await text(st.box, "echo snap-marker > /root/marker");
    st.snap = await st.box.captureSnapshot(nm("snap"), { timeout: 300 });
    st.snapshots.add(st.snap.id);
    eq(st.snap.status, "ready", "status");
    eq((await client.getSnapshot(st.snap.id)).name, st.snap.name, "getSnapshot name");
    eq((await client.waitForSnapshot(st.snap.id, { timeout: 60 })).status, "ready", "waitForSnapshot");
    const list = await client.listSnapshots({ nameContains: `scn-${tag}` });
    must(list.some((s) => s.id === st.snap.id), `listSnapshots: ${show(list.map((s) => s.name).join(","))}`);
    const other = await client.captureSnapshot(st.box.name, nm("snap-b"), { timeout: 300 });
    st.snapshots.add(other.id);
    await client.deleteSnapshot(other.id);
    st.snapshots.delete(other.id);
    await throwsA(sdk.LangSmithResourceNotFoundError, () => client.getSnapshot(other.id), "a deleted snapshot");
  } },
  { name: "create_from_snapshot", needs: ["snapshot"], run: async () => {
    const p = await created(client.createSandbox({ snapshotName: st.snap.name, name: nm("from-snap"), waitForReady: false }));
    st.box2 = await client.waitForSandbox(p.name, { timeout: 300 });
    eq(st.box2.status, "ready", "status");
    eq(await text(st.box2, "cat /root/marker"), "snap-marker\n", "the file captured");
  } },
  { name: "stop_start", needs: ["create_from_snapshot"], run: async () => {
    await text(st.box2, "echo kept > /root/state");
    await st.box2.stop();
    await stopped(st.box2.name, "after sandbox.stop()");
    await client.startSandbox(st.box2.name, { timeout: 300 });
    eq(await text(st.box2, "cat /root/state"), "kept\n", "after the first start");
    await client.stopSandbox(st.box2.name);
    await stopped(st.box2.name, "after client.stopSandbox()");
    eq((await client.getSandbox(st.box2.name)).status, "stopped", "getSandbox's status after the stop");
    await st.box2.start({ timeout: 300 });
    eq(st.box2.status, "ready", "status after start");
    eq(await text(st.box2, "cat /root/state /root/marker"), "kept\nsnap-marker\n", "after the second start");
  } },
  { name: "update", needs: ["create_from_snapshot"], run: async () => {
    const renamed = nm("renamed");
    const u = await client.updateSandbox(st.box2.name, renamed);
    eq(u.name, renamed, "new name");
    eq(u.id, st.box2.id, "id kept");
    st.sandboxes.delete(st.box2.name);
    st.sandboxes.add(renamed);
    await throwsA(sdk.LangSmithResourceNotFoundError, () => client.getSandbox(st.box2.name), "the old name");
    st.box2 = await client.getSandbox(renamed);
  } },
  { name: "not_found", run: async () => {
    await throwsA(sdk.LangSmithResourceNotFoundError, () => client.getSandbox(nm("missing")), "getSandbox");
    await throwsA(sdk.LangSmithResourceNotFoundError, () => client.deleteSandbox(nm("missing")), "deleteSandbox");
  } },
  { name: "auth", run: async () => {
    const bad = new SandboxClient({ apiEndpoint: `${base}/api/v2/sandboxes`, apiKey: "not-a-key", maxRetries: 0 });
    await throwsA(sdk.LangSmithSandboxAuthenticationError, () => bad.listSandboxes(), "a wrong key");
    must(!String(client).includes(env.SANDBOXD_KEY), "toString shows the key");
  } },
  { name: "tenancy", needs: ["create_default"], run: async () => {
    await throwsA(sdk.LangSmithResourceNotFoundError, () => client2.getSandbox(st.box.name), "another workspace's sandbox");
    const l = await client2.listSandboxes();
    must(!l.some((s) => s.id === st.box.id), "another workspace's sandbox is listed");
  } },
  { name: "quota", run: async () => {
    const one = await created(client2.createSandbox({ name: nm("q1"), ...CREATE }));
    const err = await throwsA(sdk.LangSmithQuotaExceededError,
      () => client2.createSandbox({ name: nm("q2"), ...CREATE }), "a second sandbox over sandboxes=1");
    await client2.deleteSandbox(one.name);
    st.sandboxes.delete(one.name);
    return show(err.message);
  } },
  { name: "registries", run: async () => {
    const reg = await client.registries.create({ name: nm("reg"), url: "127.0.0.1:9", username: "u", password: `pw-${tag}` });
    must(!JSON.stringify(reg).includes(`pw-${tag}`), "the registry's password came back");
    const l = await client.registries.list();
    const items = l.registries ?? l.items ?? [];
    must(items.some((r) => r.name === nm("reg")), `registries: ${show(JSON.stringify(l))}`);
    await client.registries.delete(nm("reg"));
  } },
  // Fails whether or not docs/api.md refuses the method: either way an SDK error, bounded.
  { name: "image_unreachable", run: async () => {
    const t0 = Date.now();
    let err = null;
    try {
      const s = await client.createSnapshot(nm("img"), "127.0.0.1:9/none/none:latest", 1 << 30, { timeout: 120 });
      st.snapshots.add(s.id);
    } catch (e) {
      err = e;
    }
    must(err instanceof sdk.LangSmithSandboxError,
      `an image from a registry that is not there: ${err ? err.constructor.name : "no error"}`);
    return `${err.constructor.name} after ${Date.now() - t0} ms`;
  } },
  // Likewise: refused, or its build fails in a busybox guest (no BuildKit); no builder left.
  { name: "dockerfile", run: async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "scn-"));
    try {
      fs.writeFileSync(path.join(dir, "Dockerfile"), "FROM busybox\nRUN true\n");
      const s = await client.createSnapshotFromDockerfile(nm("df"), path.join(dir, "Dockerfile"), { context: dir, timeout: 120 });
      st.snapshots.add(s.id);
      throw new Error(`built snapshot ${s.id} from a Dockerfile: not expected of a busybox guest`);
    } catch (e) {
      must(e instanceof sdk.LangSmithSandboxError, `${e.constructor.name}: ${e.message}`);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    const left = (await client.listSandboxes()).filter((s) => s.name.startsWith("snapshot-builder-"));
    eq(left.length, 0, "builder sandboxes left");
  } },
  { name: "delete", needs: ["create_default"], run: async () => {
    const name = st.box.name;
    await st.box.delete();
    st.sandboxes.delete(name);
    await throwsA(sdk.LangSmithResourceNotFoundError, () => client.getSandbox(name), "a deleted sandbox");
    if (st.box2) {
      await client.deleteSandbox(st.box2.name);
      st.sandboxes.delete(st.box2.name);
    }
    if (st.snap) {
      await client.deleteSnapshot(st.snap.id);
      st.snapshots.delete(st.snap.id);
    }
    const all = await client.listSandboxes();
    must(!all.some((s) => s.name.startsWith(`scn-${tag}-`)), `left: ${show(all.map((s) => s.name).join(","))}`);
  } },
  // Last: what the scenario called, against the installed .d.ts and docs/api.md.
  { name: "methods", run: async () => coverage(sdkDir, apiDoc, recorder) },
];

// Without ws the client runs blocking commands over POST /execute; these checks need no
// WebSocket. "@no-ws" in SCENARIO_SUBSET stands for them.
const NO_WS = "create_default get list run_exit run_streams run_env run_cwd run_default_shell " +
  "files_text files_binary files_5mib files_missing not_found auth delete";

let subset = null;
if (env.SCENARIO_SUBSET) {
  subset = new Set(env.SCENARIO_SUBSET.replace("@no-ws", NO_WS).split(/[\s,]+/).filter(Boolean));
  const unknown = [...subset].filter((n) => !checks.some((c) => c.name === n));
  if (unknown.length > 0) {
    console.error(`scenario: unknown checks in SCENARIO_SUBSET: ${unknown.join(" ")}`);
    process.exit(2);
  }
}
const version = JSON.parse(fs.readFileSync(path.join(sdkDir, "package.json"), "utf8")).version;
console.log(`scenario: langsmith ${version} against ${base}, ${subset ? subset.size : checks.length} checks`);
// Whether the service still answers (any HTTP status): null, else why not.
async function alive() {
  try {
    await fetch(`${base}/api/v2/sandboxes/boxes`, {
      headers: { "X-Api-Key": env.SANDBOXD_KEY },
      signal: AbortSignal.timeout(10000),
    });
    return null;
  } catch (e) {
    return `the service does not answer (${e.cause?.code ?? e.message})`;
  }
}
const failures = await runChecks(checks, subset, limitMs, alive);

// Whatever a failed check left, best effort and bounded.
for (const n of st.sandboxes)
  await bounded(client.deleteSandbox(n), 60000, "cleanup").catch(() => client2.deleteSandbox(n).catch(() => {}));
for (const id of st.snapshots) await bounded(client.deleteSnapshot(id), 60000, "cleanup").catch(() => {});
console.log(failures === 0 ? "scenario: all checks passed" : `scenario: ${failures} check(s) failed`);
process.exit(failures === 0 ? 0 : 1);
