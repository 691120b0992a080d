import { describe, expect, it } from 'vitest';
import {
  InvalidAdmissionInputError,
  InvalidProfileError,
  ProfileAdmissionError,
  ProfileFileError,
  UnknownProfileError,
} from './errors.js';

describe('profile-admission errors', () => {
  it('each carries a stable code, its name, and the field, file or argument with the refused value', () => {
    const errors = [
      new InvalidProfileError(
        [{ path: 'roles.decode.tpSize', value: 3, rule: 'must divide numKvHeads (8) or be a multiple of it' }],
        'qwen.json',
      ),
      new ProfileFileError('qwen.json', 'ENOENT: no such file or directory'),
      new UnknownProfileError('qwen3-8b', ['qwen3-0.6b-bf16-b64']),
      new InvalidAdmissionInputError('facts.settings', undefined, 'must be resolved settings'),
    ];
    expect(errors.every((error) => error instanceof ProfileAdmissionError)).toBe(true);
    expect(errors.map((error) => [error.code, error.name, error.message])).toEqual([
      [
        'INVALID_PROFILE',
        'InvalidProfileError',
        'invalid deployment profile in qwen.json: roles.decode.tpSize = 3: must divide numKvHeads (8) or be a multiple of it',
      ],
      [
        'PROFILE_FILE_UNREADABLE',
        'ProfileFileError',
        'cannot load the deployment profile qwen.json: ENOENT: no such file or directory',
      ],
      [
        'UNKNOWN_PROFILE',
        'UnknownProfileError',
        'no built-in deployment profile is named "qwen3-8b" (did you mean qwen3-0.6b-bf16-b64?); the built-in profiles are qwen3-0.6b-bf16-b64',
      ],
      [
        'INVALID_ADMISSION_INPUT',
        'InvalidAdmissionInputError',
        'facts.settings = undefined is refused: must be resolved settings',
      ],
    ]);
  });

  it('render refused values as they are: NaN, bigints and nested values', () => {
    expect(
      new InvalidProfileError([{ path: 'version', value: Number.NaN, rule: 'must be an integer' }], undefined).message,
    ).toBe('invalid deployment profile: version = NaN: must be an integer');
    expect(new InvalidAdmissionInputError('facts.workers[0]', { ranks: [1n] }, 'must be a worker').message).toBe(
      'facts.workers[0] = {"ranks":[1n]} is refused: must be a worker',
    );
  });
});
