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
export {
  attachControlPlane,
  ControlPlane,
  kubeconfigFor,
  kubeconfigWithToken,
  type ComponentOptions,
  type ControlPlaneInfo,
} from './control-plane.ts';
export type { Identity } from './pki.ts';
