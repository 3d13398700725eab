// The scenario's harness (tests/service/scenario.mjs): how checks run and report, the TCP
// relay that cuts a WebSocket when the test says so, and the coverage rule (every public
// method of SandboxClient and Sandbox in the installed type declarations is called by the
// scenario or listed in docs/api.md as refused).
import { AsyncLocalStorage } from "node:async_hooks";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";

// ---- checks -------------------------------------------------------------------------------

export class CheckFailure extends Error {}

export function must(cond, why) {
  if (!cond) throw new CheckFailure(why);
}

export function eq(got, want, what) {
  if (got !== want)
    throw new CheckFailure(`${what}: got ${show(got)}, want ${show(want)}`);
}

// A value for a message: strings cut at 200 characters, escapes visible.
export function show(v) {
  let s = typeof v === "string" ? JSON.stringify(v) : String(v);
  if (s.length > 200) s = s.slice(0, 200) + `... (${s.length} chars)`;
  return s;
}

// fn() must throw an instance of cls; returns the error.
export async function throwsA(cls, fn, what) {
  let err = null;
  try {
    await fn();
  } catch (e) {
    err = e;
  }
  must(err !== null, `${what}: no error (want ${cls.name})`);
  must(
    err instanceof cls,
    `${what}: ${err?.constructor?.name}: ${err?.message} (want ${cls.name})`,
  );
  return err;
}

// The promise, or a CheckFailure after ms: every wait on the service is bounded.
export function bounded(promise, ms, what) {
  let timer;
  const t = new Promise((_, reject) => {
    timer = setTimeout(
      () => reject(new CheckFailure(`${what}: no answer in ${ms / 1000} s`)),
      ms,
    );
  });
  return Promise.race([promise, t]).finally(() => clearTimeout(timer));
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Runs each check in order, prints "ok NAME" or "FAIL NAME: why" (one line each), and
// returns the number of failures. A check whose `needs` failed fails too, naming it; after a
// failure, alive() says whether the service still answers, and once it does not every check
// left fails at once (not each after the client's retries).
export async function runChecks(checks, subset, limitMs, alive) {
  const failed = new Set();
  let failures = 0;
  let gone = null;
  for (const c of checks) {
    if (subset && !subset.has(c.name)) continue;
    if (gone) {
      console.log(`FAIL ${c.name}: not run: ${gone}`);
      failed.add(c.name);
      failures++;
      continue;
    }
    const missing = (c.needs || []).filter((n) => failed.has(n));
    if (missing.length > 0) {
      console.log(`FAIL ${c.name}: needs ${missing.join(", ")}, which failed`);
      failed.add(c.name);
      failures++;
      continue;
    }
    const t0 = Date.now();
    try {
      const note = await bounded(c.run(), limitMs, c.name);
      const ms = Date.now() - t0;
      console.log(`ok ${c.name}${note ? ` (${note})` : ""} [${ms} ms]`);
    } catch (e) {
      failed.add(c.name);
      failures++;
      const why = e instanceof CheckFailure ? e.message : `${e?.constructor?.name}: ${e?.message}`;
      console.log(`FAIL ${c.name}: ${oneLine(why)}`);
      if (!(e instanceof CheckFailure) && process.env.SCENARIO_VERBOSE && e?.stack)
        console.error(e.stack);
      gone = await alive();
    }
  }
  return failures;
}

function oneLine(s) {
  return String(s).replace(/\s+/g, " ").slice(0, 600);
}

// ---- the relay ----------------------------------------------------------------------------

// A TCP relay on 127.0.0.1 to host:port. sever() destroys every connection it carries;
// cutAfter(n) severs the next connection once n bytes went from the service to the client
// (mid-frame, as a network cut would be); refuse stops new connections.
export class Relay {
  constructor(host, port) {
    this.host = host;
    this.port = port;
    this.pairs = new Set();
    this.refuse = false;
    this.cutAt = 0;
    this.cuts = 0;
    this.connections = 0;
    this.server = net.createServer((client) => this._accept(client));
  }

  listen() {
    return new Promise((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(0, "127.0.0.1", () => resolve(this.server.address().port));
    });
  }

  _accept(client) {
    if (this.refuse) {
      client.destroy();
      return;
    }
    this.connections++;
    const upstream = net.connect(this.port, this.host);
    const pair = { client, upstream, down: 0, cutAt: this.cutAt };
    this.cutAt = 0;
    this.pairs.add(pair);
    const end = () => {
      client.destroy();
      upstream.destroy();
      this.pairs.delete(pair);
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
    client.on("data", (b) => upstream.write(b));
    upstream.on("data", (b) => {
      if (pair.cutAt > 0 && pair.down + b.length >= pair.cutAt) {
        client.write(b.subarray(0, pair.cutAt - pair.down));
        this.cuts++;
        end();
        return;
      }
      pair.down += b.length;
      client.write(b);
    });
  }

  cutAfter(n) {
    this.cutAt = n;
  }

  sever() {
    for (const p of [...this.pairs]) {
      p.client.destroy();
      p.upstream.destroy();
      this.pairs.delete(p);
    }
    this.cuts++;
  }

  close() {
    this.refuse = true;
    this.sever();
    this.server.close();
  }
}

// ---- coverage ------------------------------------------------------------------------------

// Public members of `export declare class NAME` in a .d.ts: methods and accessors declared
// at the class's first indentation, without private/protected/static, constructor excluded.
export function publicMethods(dtsText, className) {
  const lines = dtsText.split("\n");
  const start = lines.findIndex((l) => l.startsWith(`export declare class ${className} `));
  if (start < 0) return null;
  const names = new Set();
  for (let i = start + 1; i < lines.length && !lines[i].startsWith("}"); i++) {
    const m = /^ {4}(?:get |set )?([A-Za-z_$][\w$]*)\??\s*[(<]/.exec(lines[i]);
    if (!m) continue;
    if (/^ {4}(private|protected|static|readonly)\b/.test(lines[i])) continue;
    if (m[1] !== "constructor") names.add(m[1]);
  }
  return names;
}

// docs/api.md's section "Refused methods": lines "- `methodName`: 4xx why" (or
// "`Class.methodName`", and a note in parentheses may follow the name: "- `tunnel` (Python
// only): 404 why"); a line that wraps goes on indented. Returns { refused: Map name -> "4xx why", bad: [lines] } or null
// without the section.
export function refusedMethods(mdText) {
  const lines = mdText.split("\n");
  const start = lines.findIndex((l) => /^#{1,6}\s+Refused methods\s*$/.test(l));
  if (start < 0) return null;
  const refused = new Map();
  const bad = [];
  for (let i = start + 1; i < lines.length && !/^#{1,6}\s/.test(lines[i]); i++) {
    const l = lines[i];
    if (!l.startsWith("- ")) continue;
    const m = /^- `((?:SandboxClient\.|Sandbox\.)?[A-Za-z_$][\w$]*)`(?: \([^)]*\))?:\s*(4\d\d)\b\s*(.*)$/.exec(l);
    if (m) refused.set(m[1], `${m[2]} ${m[3]}`.trim());
    else bad.push(l);
  }
  return { refused, bad };
}

// Records which public members of the classes' prototypes the scenario itself calls: a call
// made from inside another SDK call (sandbox.start calling client.startSandbox) is not
// counted, so a method counts only when the scenario calls it.
export class CallRecorder {
  constructor() {
    this.called = new Map();
    this.inside = new AsyncLocalStorage();
  }

  wrap(cls) {
    const seen = new Set();
    this.called.set(cls.name, seen);
    const rec = this;
    for (const key of Object.getOwnPropertyNames(cls.prototype)) {
      if (key === "constructor") continue;
      const d = Object.getOwnPropertyDescriptor(cls.prototype, key);
      if (typeof d.value === "function") {
        const orig = d.value;
        d.value = function (...args) {
          if (rec.inside.getStore()) return orig.apply(this, args);
          seen.add(key);
          return rec.inside.run(true, () => orig.apply(this, args));
        };
        Object.defineProperty(cls.prototype, key, d);
      } else if (typeof d.get === "function") {
        const orig = d.get;
        d.get = function () {
          if (rec.inside.getStore()) return orig.call(this);
          seen.add(key);
          return rec.inside.run(true, () => orig.call(this));
        };
        Object.defineProperty(cls.prototype, key, d);
      }
    }
  }
}

// The coverage check: every public method of each class in the installed .d.ts is called or
// refused in docs/api.md. Returns a note for the report.
export function coverage(sdkDir, apiDoc, recorder) {
  let md = null;
  try {
    md = fs.readFileSync(apiDoc, "utf8");
  } catch (e) {
    md = null;
  }
  const parsed = md === null ? null : refusedMethods(md);
  if (parsed && parsed.bad.length > 0)
    throw new CheckFailure(
      `${apiDoc}: lines of "Refused methods" not of the form "- \`name\`: 4xx why": ${parsed.bad.map(show).join(", ")}`,
    );
  const refused = parsed ? parsed.refused : new Map();
  const missing = [];
  let total = 0;
  for (const [cls, file] of [
    ["SandboxClient", "client.d.ts"],
    ["Sandbox", "sandbox.d.ts"],
  ]) {
    const text = fs.readFileSync(path.join(sdkDir, "lib", "sandbox", file), "utf8");
    const names = publicMethods(text, cls);
    must(names && names.size > 0, `no public method of ${cls} found in ${file}`);
    const called = recorder.called.get(cls) || new Set();
    for (const n of names) {
      total++;
      if (called.has(n) || refused.has(n) || refused.has(`${cls}.${n}`)) continue;
      missing.push(`${cls}.${n}`);
    }
  }
  if (missing.length > 0) {
    let doc = apiDoc;
    if (md === null) doc += " (missing)";
    else if (!parsed) doc += ' (no "Refused methods" section)';
    throw new CheckFailure(`neither called nor refused in ${doc}: ${missing.join(", ")}`);
  }
  return `${total} methods, ${refused.size} refused`;
}

// The refusal documented for a method of cls, or undefined.
export function refusalOf(refused, cls, name) {
  return refused.get(`${cls}.${name}`) ?? refused.get(name);
}
