/**
 * An error whose message is the whole story for the person running `cdk synth` or `cdk deploy`
 * (bad configuration, a missing tool or crate): the CLI prints it without a stack trace.
 */
export class SetupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SetupError';
  }
}
