export * from './errors.js';
export * from './discovery/index.js';
