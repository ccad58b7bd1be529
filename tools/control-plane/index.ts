// The local control plane: real kube-apiserver and etcd binaries, built once per machine, started
// on loopback for the integration tests and for `cirrus cluster`.
export {
  AssetsUnavailableError,
  buildFolder,
  cacheRoot,
  commandExists,
  goBuild,
  isExecutable,
  pinnedVersions,
  resolveAssets,
  versionStamps,
  type ComponentBinaries,
  type ControlPlaneAssets,
} from './assets.ts';
export type { ComponentOptions } from './components.ts';
export { inRequirementModule, resolveGoTool, type GoTool, type GoToolBinary, type GoToolOptions } from './go-tool.ts';
export type { ProgressSink } from './assets.ts';
export { attachControlPlane, ControlPlane, ControlPlaneInterrupted, type ControlPlaneInfo } from './control-plane.ts';
export { kubeconfigFor, kubeconfigWithToken } from './kubeconfig.ts';
export type { Identity } from './pki.ts';
