import { kvreuseSettings } from '/work/wt/user/packages/cli/dist/settings/all-settings.js';
import { exampleSettingsPath } from '/work/wt/user/packages/cli/dist/settings/example.js';
import { runMainJob } from '/work/wt/user/packages/cli/dist/demo/main-job.js';
import { loadTransport } from '@kvreuse/native-bindings';
import { PerformanceObserver } from 'node:perf_hooks';
const gcs = [];
new PerformanceObserver((list) => gcs.push(...list.getEntries())).observe({ entryTypes: ['gc'] });
const { settings } = kvreuseSettings.resolve({ file: exampleSettingsPath, env: {}, argv: [] });
const marks = [];
const clock = () => { const u = process.cpuUsage(); const c = (u.user + u.system) / 1000; marks.push([performance.now(), c]); return c; };
await runMainJob({ settings, capabilities: loadTransport().capabilities(), backend: 'ucx', progress: (l) => { if (/^  (turn 2|short)/.test(l)) console.log(l.slice(0,60)); }, clock });
const n = marks.length;
console.log('calls', n);
for (let i = 1; i < marks.length; i++) { const d = marks[i][0]-marks[i-1][0]; const cpu = marks[i][1]-marks[i-1][1]; if (cpu > 0.5 && d < 100) { const g = gcs.filter(e => e.startTime >= marks[i-1][0] && e.startTime < marks[i][0]).map(e=>e.duration.toFixed(2)+'/'+e.detail?.kind); console.log(`#${i}/${n} gap ${d.toFixed(2)} ms wall, ${cpu.toFixed(2)} ms cpu, gc ${g}`); } }
