/** What the lookup clock is read from: monotonic wall milliseconds and CPU milliseconds. */
export interface ClockReadings {
  readonly wallMs: () => number;
  readonly cpuMs: () => number;
}

type CpuUsage = () => { readonly user: number; readonly system: number };

// The CPU time of the thread that decides where Node reports it (`process.threadCpuUsage`, Node 23.9 and
// later), else that of the process.
const threadCpuUsage = (process as { threadCpuUsage?: CpuUsage }).threadCpuUsage;
const cpuUsage: CpuUsage = threadCpuUsage === undefined ? () => process.cpuUsage() : () => threadCpuUsage();

const machineReadings: ClockReadings = {
  wallMs: () => performance.now(),
  cpuMs: () => {
    const { user, system } = cpuUsage();
    return (user + system) / 1000;
  },
};

/**
 * The clock a decision's lookup budget runs against, by default: between two readings it advances by
 * the lesser of the wall time and the CPU time spent. The budget bounds the router's own work: on a
 * machine where other jobs hold the cores, wall time alone would also count the time the scheduler gave
 * them (a 0.2 ms lookup descheduled for a time slice), and the process's CPU time alone (where Node
 * reports no thread's) what its other threads did meanwhile. A lookup that really works past the budget
 * passes it on both.
 */
export function lookupClock(readings: ClockReadings = machineReadings): () => number {
  let wall = readings.wallMs();
  let cpu = readings.cpuMs();
  let busy = 0;
  return () => {
    const nowWall = readings.wallMs();
    const nowCpu = readings.cpuMs();
    busy += Math.max(0, Math.min(nowWall - wall, nowCpu - cpu));
    wall = nowWall;
    cpu = nowCpu;
    return busy;
  };
}
