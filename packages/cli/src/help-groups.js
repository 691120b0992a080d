import { defineSettings, discoveryGroup, inventoryGroup, profileGroup, transportGroup } from '@kvreuse/config';
// The flags each command's help lists: the groups it reads (resolution always takes every kvreuse setting).
export const inspectGroupsHelp = defineSettings([discoveryGroup, profileGroup, transportGroup]);
export const profileGroupsHelp = defineSettings([profileGroup, discoveryGroup, inventoryGroup, transportGroup]);
