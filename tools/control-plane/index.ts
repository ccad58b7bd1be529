// The local control plane: real kube-apiserver and etcd binaries, built once per machine, started
// on loopback for the integration tests and for `cirrus cluster`.
export {
  AssetsUnavailableError,
  buildFolder,
  cacheRoot,
  goBuild,
  isExecutable,
  pinnedVersions,
  resolveAssets,
  versionStamps,
  type ComponentBinaries,
  type ControlPlaneAssets,
} from './assets.ts';
export type { ComponentOptions } from './components.ts';
export { attachControlPlane, ControlPlane, type ControlPlaneInfo } from './control-plane.ts';
export { kubeconfigFor, kubeconfigWithToken } from './kubeconfig.ts';
export type { Identity } from './pki.ts';
