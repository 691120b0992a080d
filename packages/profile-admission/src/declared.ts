import { type AdmissionSettings, checkSettings } from './admit.js';
import { builtInProfile, type BuiltInProfileName } from './built-in.js';
import { InvalidAdmissionInputError } from './errors.js';
import { checkProfileOptions, type Profile, type ProfileSettingsOptions } from './profile.js';
import { loadProfileFile } from './profile-file.js';

/**
 * The profile the settings declare: the built-in profile `profile.name`, the file `profile.file`, or
 * undefined when both are empty. Throws `UnknownProfileError`, `ProfileFileError` or
 * `InvalidProfileError` for a name or file that does not hold a valid profile of `options.settings`.
 */
export function declaredProfile(settings: AdmissionSettings, options: ProfileSettingsOptions): Profile | undefined {
  checkSettings(settings, 'settings');
  checkProfileOptions(options);
  const declared: unknown = settings.profile;
  if (typeof declared !== 'object' || declared === null) {
    throw new InvalidAdmissionInputError(
      'settings.profile',
      declared,
      'must be the resolved profile group { name, file } (resolve of a composition, defineSettings of @kvreuse/config)',
    );
  }
  const { name, file } = settings.profile;
  for (const [field, value] of Object.entries({ name, file })) {
    if (typeof value !== 'string')
      throw new InvalidAdmissionInputError(`settings.profile.${field}`, value, 'must be a string, empty for none');
  }
  if (name !== '' && file !== '') {
    throw new InvalidAdmissionInputError(
      'settings.profile',
      { name, file },
      'declares two profiles: set profile.name or profile.file, not both',
    );
  }
  if (name !== '') return builtInProfile(name as BuiltInProfileName, options);
  if (file !== '') return loadProfileFile(file, options);
  return undefined;
}
