import { UnknownProfileError } from './errors.js';
import type { Profile } from './profile.js';
import { loadProfileFile } from './profile-file.js';

/** The public profiles shipped in the package's `profiles/` folder, each in `<name>.json`. */
export const builtInProfileNames = [
  'qwen3-0.6b-bf16-b64',
  'llama-3.1-8b-bf16-b16',
  'llama-3.1-8b-bf16-b64',
  'llama-3.1-70b-bf16-b64',
  'deepseek-v2-lite-mla-b64',
] as const;

export type BuiltInProfileName = (typeof builtInProfileNames)[number];

const loaded = new Map<string, Profile>();

/**
 * A built-in profile by name, read from the package's `profiles/` folder (once) and checked like any
 * profile. Throws `UnknownProfileError` for another name.
 */
export function builtInProfile(name: BuiltInProfileName): Profile {
  if (!(builtInProfileNames as readonly unknown[]).includes(name))
    throw new UnknownProfileError(name, builtInProfileNames);
  let profile = loaded.get(name);
  if (profile === undefined) {
    // Sources (src/) and the build (dist/) sit side by side with profiles/, so one relative URL serves both.
    profile = loadProfileFile(new URL(`../profiles/${name}.json`, import.meta.url));
    loaded.set(name, profile);
  }
  return profile;
}

/** Every built-in profile, in `builtInProfileNames` order. */
export function builtInProfiles(): Profile[] {
  return builtInProfileNames.map(builtInProfile);
}
