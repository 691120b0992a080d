import { z } from 'zod';
import { defineGroup } from '@kvreuse/config';

/** The deployment profile a process declares. */
export const profileGroup = defineGroup('profile', {
  description:
    'The deployment profile this process declares (see `@kvreuse/profile-admission`): GPU reuse activates ' +
    'only once a declared profile is admitted against the running facts.',
  settings: {
    name: {
      schema: z
        .string()
        .regex(/^([a-z0-9][a-z0-9._-]{0,127})?$/, {
          message: 'a profile name: up to 128 of a-z, 0-9, ".", "_" and "-"',
        })
        .meta({ description: 'a profile name, or empty' }),
      default: '',
      description: 'A built-in deployment profile to declare, by name (`qwen3-0.6b-bf16-b64`, …). Empty declares none.',
    },
    file: {
      schema: z.string(),
      default: '',
      description:
        'A JSON file holding the deployment profile to declare. Empty declares none. A relative path resolves ' +
        "against the process's working directory.",
    },
  },
  rules: [
    {
      setting: 'file',
      related: ['name'],
      rule: 'profile.file and profile.name are not both set',
      why: 'a process declares one deployment profile; two would leave which one is admitted ambiguous.',
      holds: (profile) => profile.file === '' || profile.name === '',
    },
  ],
});
