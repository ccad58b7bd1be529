// The aws provider's own errors: each says what is wrong and carries what a caller branches on
// (match them with findCause, shared/cloud/errors.ts). The service-lb function turns an ensure's
// error into a Warning Event on the Service, so the message is written for the Service's owner.

/** A Service setting (annotation or spec field) cirrus cannot apply: asked for a feature not offered, or a value it cannot use. */
export class ServiceSettingError extends Error {
  override readonly name: string = 'ServiceSettingError';
  /** The annotation key or `spec.<field>` at fault. */
  readonly setting: string;
  readonly problem: string;
  constructor(setting: string, problem: string, options?: ErrorOptions) {
    super(`${setting}: ${problem}`, options);
    this.setting = setting;
    this.problem = problem;
  }
}

/** A setting that asks for a feature cirrus's aws provider does not offer. */
export class UnsupportedSettingError extends ServiceSettingError {
  override readonly name: string = 'UnsupportedSettingError';
}

/** A load balancer or target group of the expected name that is not this cluster's and this Service's. */
export class ForeignResourceError extends Error {
  override readonly name = 'ForeignResourceError';
  readonly resource: string;
  constructor(resource: string, problem: string, options?: ErrorOptions) {
    super(`${resource} ${problem}; cirrus will not take it over`, options);
    this.resource = resource;
  }
}

/** The Service's load balancer does not exist (where the call needs one that does). */
export class LoadBalancerNotFoundError extends Error {
  override readonly name = 'LoadBalancerNotFoundError';
  constructor(name: string, options?: ErrorOptions) {
    super(`load balancer ${name} not found: ensure the Service to create it`, options);
  }
}

/** No subnet can take the load balancer (none discovered, or one named that cannot be used). */
export class SubnetError extends Error {
  override readonly name = 'SubnetError';
}

/** The nodes' security groups cannot be told apart, so no ingress rule can be placed. */
export class SecurityGroupError extends Error {
  override readonly name = 'SecurityGroupError';
}
