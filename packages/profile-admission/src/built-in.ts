import { UnknownProfileError } from './errors.js';
import { checkProfileOptions, type Profile, type ProfileSettingsOptions, type SettingsComposition } from './profile.js';
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

const loaded = new WeakMap<SettingsComposition, Map<string, Profile>>();

/**
 * A built-in profile by name, read from the package's `profiles/` folder (once per composition) and
 * checked like any profile against `options.settings`. Throws `UnknownProfileError` for another name.
 */
export function builtInProfile(name: BuiltInProfileName, options: ProfileSettingsOptions): Profile {
  if (!(builtInProfileNames as readonly unknown[]).includes(name))
    throw new UnknownProfileError(name, builtInProfileNames);
  checkProfileOptions(options);
  let ofComposition = loaded.get(options.settings);
  if (ofComposition === undefined) {
    ofComposition = new Map();
    loaded.set(options.settings, ofComposition);
  }
  let profile = ofComposition.get(name);
  if (profile === undefined) {
    // Sources (src/) and the build (dist/) sit side by side with profiles/, so one relative URL serves both.
    profile = loadProfileFile(new URL(`../profiles/${name}.json`, import.meta.url), options);
    ofComposition.set(name, profile);
  }
  return profile;
}

/** Every built-in profile, in `builtInProfileNames` order. */
export function builtInProfiles(options: ProfileSettingsOptions): Profile[] {
  return builtInProfileNames.map((name) => builtInProfile(name, options));
}
