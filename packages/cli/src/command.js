import { renderOptions } from './args.js';
/** A command's full help text. */
export function renderCommandHelp(command) {
    return `usage: kvreuse ${command.name} ${command.usage}\n\n${command.summary}\n\noptions:\n${renderOptions(command.options)}\n\n${command.help()}`.trimEnd() + '\n';
}
