// Typed errors of @kvreuse/profile-admission. Each carries a stable `code` and names the field, file,
// profile or option involved, and the value that was refused.
import { closestName } from '@kvreuse/config';
import { describeValue, KvreuseError, printable } from '@kvreuse/errors';

export type ProfileAdmissionErrorCode =
  'INVALID_PROFILE' | 'PROFILE_FILE_UNREADABLE' | 'UNKNOWN_PROFILE' | 'INVALID_ADMISSION_INPUT';

export abstract class ProfileAdmissionError extends KvreuseError<ProfileAdmissionErrorCode> {}

/** One thing wrong with a profile: where (a dotted path such as `roles.decode.tpSize`), what was there, and the rule. */
export interface ProfileIssue {
  readonly path: string;
  readonly value: unknown;
  readonly rule: string;
}

/** A profile that does not match the schema or its own rules; `issues` lists every problem, each by its path. */
export class InvalidProfileError extends ProfileAdmissionError {
  readonly code = 'INVALID_PROFILE';
  constructor(
    readonly issues: readonly ProfileIssue[],
    /** Where the profile came from (a file path), when it came from one. */
    readonly source: string | undefined,
  ) {
    const listed = issues.map((issue) => `${issue.path} = ${describeValue(issue.value)}: ${issue.rule}`).join('; ');
    super(`invalid deployment profile${source === undefined ? '' : ` in ${printable(source)}`}: ${listed}`);
  }
}

/** A profile file that cannot be read or is not JSON; nothing was loaded. */
export class ProfileFileError extends ProfileAdmissionError {
  readonly code = 'PROFILE_FILE_UNREADABLE';
  constructor(
    readonly file: string,
    readonly reason: string,
    options?: ErrorOptions,
  ) {
    super(`cannot load the deployment profile ${printable(file)}: ${reason}`, options);
  }
}

/** A profile name that no built-in profile has. */
export class UnknownProfileError extends ProfileAdmissionError {
  readonly code = 'UNKNOWN_PROFILE';
  constructor(
    readonly profileName: unknown,
    readonly known: readonly string[],
  ) {
    const closest = typeof profileName === 'string' ? closestName(profileName, known) : undefined;
    super(
      `no built-in deployment profile is named ${describeValue(profileName)}${closest === undefined ? '' : ` (did you mean ${closest}?)`}; the built-in profiles are ${known.join(', ')}`,
    );
  }
}

/** An argument of the wrong shape (facts without settings, a gate without capabilities, …). */
export class InvalidAdmissionInputError extends ProfileAdmissionError {
  readonly code = 'INVALID_ADMISSION_INPUT';
  constructor(
    readonly argument: string,
    readonly value: unknown,
    readonly rule: string,
  ) {
    super(`${argument} = ${describeValue(value)} is refused: ${rule}`);
  }
}
