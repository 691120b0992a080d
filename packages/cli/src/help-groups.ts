import { defineSettings } from '@kvreuse/config';
import { discoveryGroup } from '@kvreuse/discovery';
import { inventoryGroup } from '@kvreuse/inventory';
import { profileGroup } from '@kvreuse/profile-admission';
import { transportGroup } from '@kvreuse/native-bindings';

// The flags each command's help lists: the groups it reads (resolution always takes every kvreuse setting).
export const inspectGroupsHelp = defineSettings([discoveryGroup, profileGroup, transportGroup]);
export const profileGroupsHelp = defineSettings([profileGroup, discoveryGroup, inventoryGroup, transportGroup]);
export const transportGroupHelp = defineSettings([transportGroup]);
