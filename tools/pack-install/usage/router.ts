import { defineSettings } from '@kvreuse/config';
import { estimatePull, routerGroup } from '@kvreuse/router';

const { settings } = defineSettings([routerGroup]).resolve({
  env: {},
  argv: ['--router-transfer-source-prefill-token-us', '80'],
});
// 42 blocks of 64 tokens from a host-memory source on this machine, no calibration yet: the priors.
const estimate = estimatePull(
  { extent: 42, blockTokens: 64, tier: 'host', linkClass: 'same-host' },
  settings.router,
  undefined,
);
console.log(JSON.stringify(estimate));
