export const jsonOption = { name: 'json', description: 'print machine-readable JSON on stdout' };
export function wantsJson(args) {
    return args.options.has('json');
}
