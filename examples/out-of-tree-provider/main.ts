#!/usr/bin/env node
// A provider package's own executable: register the provider, then run cirrus's command line.
//   node main.ts serve node-init --cloud-provider naming --cloud-config naming.yaml
import './naming-provider.ts';
import { runFromProcess } from 'cirrus-ccm';

await runFromProcess();
